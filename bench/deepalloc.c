/*
 * deepalloc: a deterministic, single-threaded, allocation-heavy program
 * with deep call stacks, shaped like an interpreter running a script with
 * every object on the C allocator (CPython with PYTHONMALLOC=malloc).
 *
 *     deepalloc [ALLOCS]          (default 3000000)
 *
 * The program does "tasks" until it has made ALLOCS allocations (malloc,
 * calloc and realloc calls; a realloc counts as one, as heapprof and
 * heaptrack count it). A task follows one of NPATHS fixed call paths: 48
 * to 56 nested calls of eight non-inlined "interpreter" functions
 * (ev_eval_frame, ev_call_function, ...), so every allocation has 55 to
 * 63 frames under it with main and libc's start-up frames (within
 * heapprof's default limit of 64; the args block ~30). The paths
 * are made once from a fixed seed as a tree: each new path shares a
 * prefix of a random length with an earlier one and then goes its own
 * way, as the call paths of a real program share their outer frames. A
 * task picks its path with a skewed distribution (some paths are hot,
 * every one is used), from a different rotation of the paths in the
 * second phase. At the bottom it runs a batch of 1 to 7 allocations from
 * four allocation sites (an object, a string, a dict by calloc, a list
 * grown by realloc); a quarter of the tasks also allocate an "argument
 * tuple" half way down, freed when that frame returns. That makes at
 * most NPATHS * 6 distinct allocating stacks (about 4,400 in a profile:
 * the argument blocks of paths with a common first half share theirs).
 *
 * Sizes are 16 to 512 bytes and depend on the path and the site, as each
 * type has its size in an interpreter: an object has one size, a string
 * 16 lengths, a dict two sizes, a list its doublings. (With every size
 * drawn at random, heaptrack 1.4.0's heaptrack_interpret runs out of
 * memory on the many distinct pairs of size and stack, as it does on
 * mallocbench; see docs/BENCHMARKS.md.) Lifetimes: a block is a
 * temporary freed before its task returns, a young object kept in a
 * FIFO of the last 4096 and freed when pushed out, or long-lived: kept
 * in a table until the second phase frees it. The chance of a long life
 * depends on the site (dicts and objects more often than strings). In
 * the first phase (55% of the allocations) the long-lived set grows to a
 * few hundred thousand blocks; in the second, fewer blocks live long and
 * the table is drained at random (the order a program's objects die in)
 * down to a tenth of its peak; at exit everything is freed.
 *
 * Each frame does a little work (a few rounds of a hash), as an
 * interpreter decodes and dispatches between calls, so that the program
 * is not only the allocator. Every block is filled and read back before
 * it is freed: the printed checksum is the same on every run and under
 * every profiler, and catches a profiler that corrupts memory.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))
/* Work after a call keeps the compiler from turning it into a tail call,
 * which would drop the caller's frame from the stack. */
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

enum {
	NPATHS = 768,    /* distinct call paths */
	MIN_DEPTH = 48,  /* interpreter frames on a path */
	MAX_DEPTH = 56,  /* ... at most (63 frames in all) */
	NFUNCS = 8,      /* interpreter functions */
	YOUNG = 4096,    /* the FIFO of young objects */
	FRAME_WORK = 6,  /* hash rounds per frame */
	PHASE1_PCT = 55, /* share of the allocations in the first phase */
	FINAL_PCT = 10,  /* long-lived blocks left after the second, % */
};

/* The allocation sites. */
enum {
	SITE_OBJECT,
	SITE_STRING,
	SITE_DICT,
	SITE_LIST,
	SITE_LIST_GROW,
	SITE_ARGS
};

/* splitmix64: small, fast and good enough. */
static inline uint64_t da_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

struct da_block {
	unsigned char *p;
	uint32_t n;
};

static struct {
	uint64_t rng;
	uint64_t sum;
	long target;    /* allocations to make */
	long phase1;    /* allocations in the first phase */
	long allocs;    /* made so far */
	long n_site[6]; /* calls per allocation site (SITE_*) */
	long n_table;   /* the long-lived table's own (re)allocations */
	int phase;      /* 1 or 2 */
	/* long-lived blocks */
	struct da_block *live;
	long nlive, cap, peak;
	long drain_from; /* nlive when the second phase began */
	/* young objects */
	struct da_block young[YOUNG];
	unsigned young_pos;
	/* the paths */
	unsigned char path[NPATHS][MAX_DEPTH];
	unsigned char depth[NPATHS];
	/* each path's sizes (see da_make_paths) */
	uint16_t obj_size[NPATHS], str_base[NPATHS], dict_size[NPATHS];
	uint16_t list_size[NPATHS];
	/* which (path, site) pairs allocated: the distinct stacks */
	unsigned char used[NPATHS][8];
} g;

static unsigned char *da_fill(unsigned char *p, size_t n, uint64_t tag)
{
	size_t prefix = n < 32 ? n : 32;
	memset(p, (int)(tag & 0xff), prefix);
	p[n / 2] = (unsigned char)(tag >> 8);
	p[n - 1] = (unsigned char)(tag >> 16);
	return p;
}

static uint64_t da_digest(const unsigned char *p, size_t n)
{
	return p[0] * 31u + p[n - 1] * 7u + p[n / 2] + n;
}

static void da_oom(size_t n)
{
	fprintf(stderr, "deepalloc: out of memory (%zu bytes)\n", n);
	exit(1);
}

static void da_free(struct da_block *b)
{
	g.sum += da_digest(b->p, b->n);
	free(b->p);
	b->p = NULL;
}

/* The long-lived table drains, in the second phase, along a straight
 * line from its size then to FINAL_PCT% of its peak at the end. */
static void da_drain(void)
{
	long done = g.allocs - g.phase1, len = g.target - g.phase1;
	long floor_ = g.peak * FINAL_PCT / 100;
	long want = g.drain_from - (g.drain_from - floor_) * done / len;
	while (g.nlive > want) {
		long i = (long)(da_rand(&g.rng) % (uint64_t)g.nlive);
		da_free(&g.live[i]);
		g.live[i] = g.live[--g.nlive];
	}
}

/* Count one allocation; start the second phase after the first. */
static void da_counted(void)
{
	g.allocs++;
	if (g.phase == 1 && g.allocs >= g.phase1) {
		g.phase = 2;
		g.drain_from = g.nlive;
	}
	if (g.phase == 2)
		da_drain();
}

/* Where a finished block goes: the long-lived table (pct% of the time,
 * pct by site and phase), the young FIFO (half the rest) or back to the
 * caller as a temporary (returns 1: the caller frees it). */
static int da_keep(unsigned char *p, uint32_t n, unsigned pct)
{
	uint64_t x = da_rand(&g.rng) % 200;
	if (g.phase == 2)
		pct /= 4;
	if (x < 2 * pct) {
		if (g.nlive == g.cap) {
			g.cap = g.cap ? g.cap * 2 : 65536;
			g.live = realloc(g.live,
			                 (size_t)g.cap * sizeof(*g.live));
			if (!g.live)
				da_oom((size_t)g.cap * sizeof(*g.live));
			g.n_table++;
		}
		g.live[g.nlive].p = p;
		g.live[g.nlive].n = n;
		if (++g.nlive > g.peak)
			g.peak = g.nlive;
		return 0;
	}
	if (x & 1) {
		struct da_block *b = &g.young[g.young_pos++ % YOUNG];
		if (b->p)
			da_free(b);
		b->p = p;
		b->n = n;
		return 0;
	}
	return 1;
}

/* ---- the allocation sites: the only calls of the allocator ----
 * Each counts its calls in a counter of its own, which also keeps
 * identical-code folding (-fipa-icf at -O2) from merging them. */

static NOINLINE unsigned char *site_object(uint32_t n)
{
	unsigned char *p = malloc(n);
	if (!p)
		da_oom(n);
	g.n_site[SITE_OBJECT]++;
	KEEP_FRAME();
	return p;
}

static NOINLINE unsigned char *site_string(uint32_t n)
{
	unsigned char *p = malloc(n);
	if (!p)
		da_oom(n);
	g.n_site[SITE_STRING]++;
	KEEP_FRAME();
	return p;
}

static NOINLINE unsigned char *site_dict(uint32_t n)
{
	/* 16-byte entries when they fit, as a hash table's slots. */
	unsigned char *p = (n % 16 == 0) ? calloc(n / 16, 16) : calloc(n, 1);
	if (!p)
		da_oom(n);
	g.n_site[SITE_DICT]++;
	KEEP_FRAME();
	return p;
}

static NOINLINE unsigned char *site_list_new(uint32_t n)
{
	unsigned char *p = malloc(n);
	if (!p)
		da_oom(n);
	g.n_site[SITE_LIST]++;
	KEEP_FRAME();
	return p;
}

static NOINLINE unsigned char *site_list_grow(unsigned char *old, uint32_t n)
{
	unsigned char *p = realloc(old, n);
	if (!p)
		da_oom(n);
	g.n_site[SITE_LIST_GROW]++;
	KEEP_FRAME();
	return p;
}

static NOINLINE unsigned char *site_args(uint32_t n)
{
	unsigned char *p = malloc(n);
	if (!p)
		da_oom(n);
	g.n_site[SITE_ARGS]++;
	KEEP_FRAME();
	return p;
}

/* ---- the batch at the bottom of a task ---- */

static NOINLINE void da_batch(unsigned pathno, uint64_t tag)
{
	unsigned char *tmp[8];
	uint32_t tlen[8];
	int ntmp = 0;
	uint64_t x = da_rand(&g.rng);
	int k = 1 + (int)(x % 7);
	x >>= 8;
	for (int i = 0; i < k && g.allocs < g.target; i++, x >>= 3) {
		unsigned char *p;
		uint32_t n;
		unsigned pct;
		switch (x & 7) {
		case 0:
		case 1:
		case 2: /* objects: 30% live long in the first phase */
			n = g.obj_size[pathno];
			p = site_object(n);
			g.used[pathno][SITE_OBJECT] = 1;
			pct = 30;
			break;
		case 3:
		case 4: /* strings: 10% */
			n = g.str_base[pathno] +
			    7 * (uint32_t)(da_rand(&g.rng) % 16);
			p = site_string(n);
			g.used[pathno][SITE_STRING] = 1;
			pct = 10;
			break;
		case 5: /* dicts, in 16-byte slots, small or grown: 45% */
			n = g.dict_size[pathno] << (da_rand(&g.rng) % 4 == 0);
			p = site_dict(n);
			g.used[pathno][SITE_DICT] = 1;
			pct = 45;
			break;
		default: { /* lists grown by realloc: 20% */
			n = g.list_size[pathno];
			p = site_list_new(n);
			g.used[pathno][SITE_LIST] = 1;
			int grows = (int)(da_rand(&g.rng) % 3);
			while (grows-- > 0 && n * 2 <= 512 &&
			       g.allocs + 1 < g.target) {
				da_fill(p, n, tag);
				da_counted();
				n *= 2;
				p = site_list_grow(p, n);
				g.used[pathno][SITE_LIST_GROW] = 1;
			}
			pct = 20;
			break;
		}
		}
		da_fill(p, n, tag + (uint64_t)i);
		da_counted();
		if (da_keep(p, n, pct)) {
			tmp[ntmp] = p;
			tlen[ntmp++] = n;
		}
	}
	/* The temporaries die as the task returns, newest first. */
	while (ntmp > 0) {
		ntmp--;
		g.sum += da_digest(tmp[ntmp], tlen[ntmp]);
		free(tmp[ntmp]);
	}
}

/* ---- the interpreter frames ---- */

struct da_task {
	unsigned pathno;
	int pos;      /* frames descended so far */
	int args_at;  /* the frame that allocates an argument tuple, or -1 */
	uint64_t acc; /* the frames' "work" */
	uint64_t tag;
};

static void ev_eval_frame(struct da_task *t);
static void ev_call_function(struct da_task *t);
static void ev_vectorcall(struct da_task *t);
static void ev_call_method(struct da_task *t);
static void ev_getattr(struct da_task *t);
static void ev_binary_op(struct da_task *t);
static void ev_build_map(struct da_task *t);
static void ev_for_iter(struct da_task *t);

/* A few rounds of a hash: the dispatch work between calls. */
static inline void da_work(struct da_task *t, uint64_t salt)
{
	uint64_t a = t->acc ^ salt;
	for (int i = 0; i < FRAME_WORK; i++)
		a = (a ^ (a >> 29)) * 0xbf58476d1ce4e5b9ULL + (uint64_t)i;
	t->acc = a;
}

/* One frame deeper, as the path says, or the batch at the bottom. */
static inline __attribute__((always_inline)) void da_descend(struct da_task *t)
{
	int pos = t->pos;
	if (pos >= g.depth[t->pathno]) {
		da_batch(t->pathno, t->tag);
		return;
	}
	t->pos = pos + 1;
	unsigned char *args = NULL;
	uint32_t alen = 0;
	if (pos == t->args_at) {
		alen = 16 + 8 * (uint32_t)(t->acc % 7);
		args = da_fill(site_args(alen), alen, t->tag);
		g.used[t->pathno][SITE_ARGS] = 1;
		da_counted();
	}
	switch (g.path[t->pathno][pos]) {
	case 0:
		ev_eval_frame(t);
		break;
	case 1:
		ev_call_function(t);
		break;
	case 2:
		ev_vectorcall(t);
		break;
	case 3:
		ev_call_method(t);
		break;
	case 4:
		ev_getattr(t);
		break;
	case 5:
		ev_binary_op(t);
		break;
	case 6:
		ev_build_map(t);
		break;
	default:
		ev_for_iter(t);
		break;
	}
	if (args) {
		g.sum += da_digest(args, alen);
		free(args);
	}
}

/* Eight bodies that differ (a salt of their own), so that identical-code
 * folding (-fipa-icf at -O2) cannot merge them into one function. */
#define EV_FUNC(name, salt)                                                    \
	static NOINLINE void name(struct da_task *t)                           \
	{                                                                      \
		da_work(t, salt);                                              \
		da_descend(t);                                                 \
		t->acc += salt;                                                \
		KEEP_FRAME();                                                  \
	}
EV_FUNC(ev_eval_frame, 0x1111)
EV_FUNC(ev_call_function, 0x2222)
EV_FUNC(ev_vectorcall, 0x3333)
EV_FUNC(ev_call_method, 0x4444)
EV_FUNC(ev_getattr, 0x5555)
EV_FUNC(ev_binary_op, 0x6666)
EV_FUNC(ev_build_map, 0x7777)
EV_FUNC(ev_for_iter, 0x8888)

/* ---- the paths and the driver ---- */

/* A tree of paths: path i shares a prefix with an earlier one and then
 * differs at the next frame (and, most likely, after it). */
static void da_make_paths(void)
{
	uint64_t rng = 0xdee9a110c0ffeeULL;
	for (int i = 0; i < NPATHS; i++) {
		int d = MIN_DEPTH +
		        (int)(da_rand(&rng) % (MAX_DEPTH - MIN_DEPTH + 1));
		int share = 0;
		g.depth[i] = (unsigned char)d;
		if (i > 0) {
			int j = (int)(da_rand(&rng) % (uint64_t)i);
			int lim = d < g.depth[j] ? d : g.depth[j];
			share = (int)(da_rand(&rng) % (uint64_t)lim);
			memcpy(g.path[i], g.path[j], (size_t)share);
			g.path[i][share] =
			        (unsigned char)((g.path[j][share] + 1 +
			                         da_rand(&rng) % (NFUNCS - 1)) %
			                        NFUNCS);
			share++;
		}
		for (int k = share; k < d; k++)
			g.path[i][k] = (unsigned char)(da_rand(&rng) % NFUNCS);
		/* Sizes by path, as each type has its size in an
		 * interpreter: an object 16..128 bytes; strings 16 lengths
		 * from a base of 16..400 (mostly short); a dict of 64..256
		 * bytes, sometimes twice that; a list of 16..64, grown by
		 * doubling. */
		uint64_t x = da_rand(&rng);
		g.obj_size[i] = (uint16_t)(16 + 8 * (x % 15));
		x >>= 8;
		g.str_base[i] = (uint16_t)(x % 4 ? 16 + (x >> 4) % 80
		                                 : 96 + (x >> 4) % 305);
		x >>= 24;
		g.dict_size[i] = (uint16_t)(64 * (1 + x % 4));
		x >>= 8;
		g.list_size[i] = (uint16_t)(16 + 16 * (x % 4));
	}
}

static NOINLINE void da_run(void)
{
	long task = 0;
	while (g.allocs < g.target) {
		uint64_t x = da_rand(&g.rng);
		/* Skewed: path u^2 * NPATHS for u uniform in [0, 1). */
		uint64_t u = (x >> 40) & 0xffff;
		unsigned pick = (unsigned)((u * u * NPATHS) >> 32);
		if (g.phase == 2)
			pick = (pick + NPATHS / 3) % NPATHS;
		struct da_task t = {
		        .pathno = pick,
		        .pos = 0,
		        .args_at = (x & 3) == 0 ? (int)(g.depth[pick] / 2) : -1,
		        .acc = x,
		        .tag = (uint64_t)task * 0x9e3779b1u,
		};
		da_descend(&t);
		g.sum += t.acc & 0xff;
		task++;
	}
}

int main(int argc, char **argv)
{
	long target = 3000000;
	if (argc > 2) {
		fprintf(stderr, "usage: deepalloc [ALLOCS]\n");
		return 2;
	}
	if (argc == 2) {
		char *end;
		errno = 0;
		target = strtol(argv[1], &end, 10);
		if (errno || end == argv[1] || *end || target < 100) {
			fprintf(stderr, "deepalloc: ALLOCS must be an integer "
			                ">= 100\n");
			return 2;
		}
	}
	g.rng = 0x5eed5eedULL;
	g.target = target;
	g.phase1 = target / 100 * PHASE1_PCT;
	g.phase = 1;
	da_make_paths();
	da_run();

	long peak = g.peak, left = g.nlive;
	for (long i = 0; i < g.nlive; i++)
		da_free(&g.live[i]);
	for (int i = 0; i < YOUNG; i++)
		if (g.young[i].p)
			da_free(&g.young[i]);
	free(g.live);

	long sites = 0;
	for (int i = 0; i < NPATHS; i++)
		for (int s = 0; s < 8; s++)
			sites += g.used[i][s];
	/* allocs= is what the tasks made; table= the reallocs of the
	 * long-lived table (its growth), not in allocs=. A profiler that
	 * counts every call should see allocs + table, plus what libc and
	 * the loader allocate (stdout's buffer for this line). */
	printf("RESULT deepalloc allocs=%ld malloc=%ld calloc=%ld realloc=%ld "
	       "table=%ld paths=%d path_sites=%ld peak_live=%ld "
	       "live_before_exit=%ld checksum=%016" PRIx64 "\n",
	       g.allocs,
	       g.n_site[SITE_OBJECT] + g.n_site[SITE_STRING] +
	               g.n_site[SITE_LIST] + g.n_site[SITE_ARGS],
	       g.n_site[SITE_DICT], g.n_site[SITE_LIST_GROW], g.n_table, NPATHS,
	       sites, peak, left, g.sum);
	return 0;
}
