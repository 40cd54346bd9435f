/*
 * Reading a region.  The target may still be running (or may be hostile),
 * so every value read from shared memory is copied once and checked against
 * the geometry the collector itself planned; nothing is trusted twice.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "collector/collector.h"
#include "inspect/snapshot_proc.h"
#include "util/grow.h"

static uint64_t clamp(uint64_t v, uint64_t cap)
{
	return v < cap ? v : cap;
}

/*
 * Room for n elements of sz bytes, not zeroed, freed with free().  The
 * copy of a million stacks is 300 MiB: in 4 KiB pages, writing it is a
 * page fault every 4 KiB, so big buffers ask for transparent huge pages.
 */
static void *big_alloc(size_t n, size_t sz)
{
	size_t huge = 2u << 20, bytes = (n ? n : 1) * sz;
	if (n && bytes / n != sz)
		return NULL;
	if (bytes < 2 * huge)
		return malloc(bytes);
	void *p = NULL;
	if (posix_memalign(&p, huge, bytes) != 0)
		return NULL;
	madvise(p, bytes & ~(huge - 1), MADV_HUGEPAGE); /* a hint */
	return p;
}

/* Same executable mapping as one already taken (another region of the
 * same process saw the module too). */
static bool module_seen(const struct snapshot *s, size_t k,
                        const struct hp_module_v1 *m)
{
	for (size_t i = 0; i < k; i++)
		if (s->modules[i].start == m->start &&
		    s->modules[i].end == m->end &&
		    s->modules[i].base == m->base)
			return true;
	return false;
}

static int take_modules(const struct hp_region *const *rs, int nr,
                        struct snapshot *s)
{
	uint64_t n[TARGET_MAX_REGIONS], slen[TARGET_MAX_REGIONS];
	uint64_t ntotal = 0, stotal = 0;
	for (int j = 0; j < nr; j++) {
		const struct hp_region *r = rs[j];
		n[j] = clamp(atomic_load_explicit(&r->hdr->modules_used,
		                                  memory_order_acquire),
		             r->modules_cap);
		slen[j] = clamp(atomic_load_explicit(&r->hdr->strings_used,
		                                     memory_order_acquire),
		                r->strings_cap);
		ntotal += n[j];
		stotal += slen[j] + 1;
	}
	s->modules = calloc(ntotal ? ntotal : 1, sizeof(*s->modules));
	s->build_ids = calloc(ntotal ? ntotal : 1, HP_BUILD_ID_MAX);
	s->strings = malloc(stotal + 1);
	if (!s->modules || !s->build_ids || !s->strings)
		return -ENOMEM;
	size_t k = 0, soff = 0;
	for (int j = 0; j < nr; j++) {
		const struct hp_region *r = rs[j];
		char *strs = s->strings + soff;
		memcpy(strs, r->strings, slen[j]);
		strs[slen[j]] = '\0';
		soff += slen[j] + 1;
		for (uint64_t i = 0; i < n[j]; i++) {
			const struct hp_module_v1 *m = &r->modules[i];
			if (!atomic_load_explicit(&m->ready,
			                          memory_order_acquire) ||
			    module_seen(s, k, m))
				continue;
			struct prof_module *o = &s->modules[k];
			uint64_t po = m->path_off;
			o->path = po < slen[j] ? strs + po : "";
			uint32_t bl = m->build_id_len;
			if (bl > HP_BUILD_ID_MAX)
				bl = HP_BUILD_ID_MAX;
			memcpy(s->build_ids + k * HP_BUILD_ID_MAX, m->build_id,
			       bl);
			o->build_id = s->build_ids + k * HP_BUILD_ID_MAX;
			o->build_id_len = bl;
			o->start = m->start;
			o->end = m->end;
			o->base = m->base;
			o->load_bias = m->load_bias;
			o->exact_offset = m->exact_offset;
			if (o->end < o->start)
				o->end = o->start;
			k++;
		}
	}
	s->dump.modules = s->modules;
	s->dump.nmodules = k;
	return 0;
}

/*
 * Stacks of every region, one after the other.  Equal call stacks in two
 * regions stay two entries here; the writer merges them by callsite, so
 * their sum is what the process did, and the sum is stable from dump to
 * dump (a stack's identity is its frames and heap, not its region).
 */
static int take_stacks(const struct hp_region *const *rs, int nr, bool at_max,
                       struct snapshot *s)
{
	uint64_t n[TARGET_MAX_REGIONS], nall = 0, total = 0;
	for (int j = 0; j < nr; j++) {
		const struct hp_region *r = rs[j];
		n[j] = clamp(atomic_load_explicit(&r->hdr->stacks_used,
		                                  memory_order_acquire),
		             r->stacks_cap);
		nall += n[j];
		for (uint64_t i = 0; i < n[j]; i++) {
			uint32_t nf = r->stacks[i].nframes;
			total += nf < HP_MAX_FRAMES ? nf : HP_MAX_FRAMES;
		}
	}
	s->stacks = big_alloc(nall, sizeof(*s->stacks));
	s->pcs = big_alloc(total, sizeof(uint64_t));
	if (!s->stacks || !s->pcs)
		return -ENOMEM;
	size_t k = 0, used = 0;
	for (int j = 0; j < nr; j++) {
		const struct hp_region *r = rs[j];
		for (uint64_t i = 0; i < n[j]; i++) {
			const struct hp_stack_v1 *st = &r->stacks[i];
			if (!atomic_load_explicit(&st->ready,
			                          memory_order_acquire))
				continue;
			struct hp_stack_counts cnt;
			if (at_max)
				stackmax_read(r, i, &cnt);
			else
				stack_counts(r, i, &cnt);
			/* Unused (lost an intern race), or not yet
			 * allocated from at the peak. */
			if (cnt.alloc_count == 0)
				continue;
			struct prof_stack *o = &s->stacks[k];
			*o = (struct prof_stack){0}; /* big_alloc: not zeroed */
			o->key = ((uint64_t)j << 32) | i;
			o->alloc_count = cnt.alloc_count;
			o->alloc_bytes = cnt.alloc_bytes;
			o->alloc_objects_fp = cnt.alloc_objects_fp;
			o->free_count = cnt.free_count;
			o->free_bytes = cnt.free_bytes;
			o->free_objects_fp = cnt.free_objects_fp;
			uint32_t nf = st->nframes;
			uint64_t off = st->frames_off;
			if (nf > HP_MAX_FRAMES || off > r->frames_cap ||
			    nf > r->frames_cap - off || used + nf > total) {
				/* Corrupt: keep the counters only.  off too:
				 * frames + a wild offset is undefined even
				 * for a copy of 0 bytes. */
				nf = 0;
				off = 0;
			}
			memcpy(s->pcs + used, r->frames + off,
			       nf * sizeof(uint64_t));
			o->pcs = s->pcs + used;
			o->nframes = nf;
			used += nf;
			o->heap_id =
			        st->heap_id < r->heaps_cap ? st->heap_id : 0;
			o->flags = i == 0 ? HP_STACK_OVERFLOW
			                  : (st->flags & HP_STACK_TRUNCATED);
			k++;
		}
	}
	s->dump.stacks = s->stacks;
	s->dump.nstacks = k;
	return 0;
}

/* Heap names by id: the first region that registered the id names it.
 * Heap 0 is ours (region_format): libc.malloc whatever a client wrote, so
 * the dump's heap selection and its rows agree on it. */
static int take_heaps(const struct hp_region *const *rs, int nr,
                      struct snapshot *s)
{
	uint64_t n = 1;
	for (int j = 0; j < nr; j++) {
		uint64_t u = clamp(atomic_load_explicit(&rs[j]->hdr->heaps_used,
		                                        memory_order_acquire),
		                   rs[j]->heaps_cap);
		if (u > n)
			n = u;
	}
	s->heaps = calloc(n, sizeof(*s->heaps));
	s->heap_names = calloc(n, HP_HEAP_NAME_MAX);
	if (!s->heaps || !s->heap_names)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		s->heaps[i].name = s->heap_names[i];
		for (int j = 0; j < nr; j++) {
			const struct hp_region *r = rs[j];
			if (i >= r->heaps_cap)
				continue;
			const struct hp_heap_v1 *h = &r->heaps[i];
			/* 1: published; 2: a client thread is still
			 * writing it (custom heaps, heaps.c). */
			if (atomic_load_explicit(&h->ready,
			                         memory_order_acquire) != 1)
				continue;
			memcpy(s->heap_names[i], h->name, HP_HEAP_NAME_MAX);
			s->heap_names[i][HP_HEAP_NAME_MAX - 1] = '\0';
			s->heaps[i].interval = h->interval;
			break;
		}
	}
	snprintf(s->heap_names[0], HP_HEAP_NAME_MAX, "libc.malloc");
	s->dump.heaps = s->heaps;
	s->dump.nheaps = n;
	return 0;
}

int snapshot_take_regions(const struct hp_region *const *rs, int nr,
                          bool at_peak, struct snapshot *s)
{
	memset(s, 0, sizeof(*s));
	if (nr < 1 || nr > TARGET_MAX_REGIONS)
		return -EINVAL;
	struct hp_header_v1 *h0 = rs[0]->hdr;
	for (int j = 0; j < nr; j++) {
		struct hp_header_v1 *h = rs[j]->hdr;
		for (int i = 0; i < HP_CTR_ALL; i++) {
			_Atomic uint64_t *c =
			        region_counter(rs[j], (enum hp_counter)i);
			if (c)
				s->dump.counters[i] += atomic_load_explicit(
				        c, memory_order_relaxed);
		}
		/* Adaptive sampling only raises the interval: the highest
		 * any region reports is the one in use. */
		uint64_t ci = atomic_load_explicit(&h->current_interval,
		                                   memory_order_relaxed);
		if (ci > s->dump.interval_used)
			s->dump.interval_used = ci;
	}
	/* State: the newest region's, where the client writes now. */
	struct hp_header_v1 *hn = rs[nr - 1]->hdr;
	s->dump.client_state = atomic_load(&hn->client_state);
	s->dump.stop_reason = atomic_load(&hn->stop_reason);
	/*
	 * The peak is kept in the header of the region the client accounts
	 * live bytes in (the first); each region's STACK_MAX copies follow
	 * their own header's epoch (stackmax_read).
	 */
	/* Our own geometry says whether we asked for peak tracking (the
	 * header's config_flags are in memory the client can write). */
	bool tracked = rs[0]->stack_max != NULL;
	bool at_max = tracked && at_peak;
	if (tracked) {
		s->dump.at_max = at_max;
		s->dump.max_live_bytes = atomic_load_explicit(
		        &h0->max_live_bytes, memory_order_acquire);
		s->dump.max_ts_ns = atomic_load_explicit(&h0->max_ts_ns,
		                                         memory_order_relaxed);
	}
	int rc = take_modules(rs, nr, s);
	if (!rc)
		rc = take_stacks(rs, nr, at_max, s);
	if (!rc)
		rc = take_heaps(rs, nr, s);
	if (rc)
		snapshot_free(s);
	return rc;
}

int snapshot_take(const struct hp_region *r, struct snapshot *s)
{
	return snapshot_take_regions(&r, 1, false, s);
}

/* The index in s->stacks of the stack with this key (stacks are in key
 * order); -1 if it is not there. */
static ssize_t stack_by_key(const struct snapshot *s, uint64_t key)
{
	size_t lo = 0, hi = s->dump.nstacks;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->stacks[mid].key < key)
			lo = mid + 1;
		else if (s->stacks[mid].key > key)
			hi = mid;
		else
			return (ssize_t)mid;
	}
	return -1;
}

int snapshot_take_live(const struct hp_region *const *rs, int nr, bool at_peak,
                       struct snapshot *s)
{
	memset(s, 0, sizeof(*s));
	if (nr < 1 || nr > TARGET_MAX_REGIONS)
		return -EINVAL;
	/*
	 * Blocks first, stacks after: a client interns a block's stack
	 * before it inserts the block, so every stack a block names is in
	 * the stack table by the time we read it.
	 */
	/* Never NULL, even with no block: a dump with blocks is a
	 * snapshot (the writer keeps its blocks_in_flight). */
	size_t cap = 0, n = 0;
	struct prof_block *b = hp_grow(NULL, &cap, 0, sizeof(*b));
	uint64_t busy = 0;
	if (!b)
		return -ENOMEM;
	for (int j = 0; j < nr; j++) {
		const struct hp_region *r = rs[j];
		uint64_t used = livetab_used_slots(r);
		for (uint64_t i = 0; i < used; i++) {
			uint64_t key;
			struct hp_live_v2 v;
			enum hp_live_read rc = livetab_read(r, i, &key, &v);
			if (rc == HP_LIVE_READ_BUSY)
				busy++;
			if (rc != HP_LIVE_READ_OK)
				continue;
			struct prof_block *nb = hp_grow(b, &cap, n, sizeof(*b));
			if (!nb) {
				free(b);
				return -ENOMEM;
			}
			b = nb;
			b[n++] = (struct prof_block){
			        .address = key,
			        .size = v.size,
			        .charged = v.charged,
			        .objects_fp = v.objects_fp,
			        .stack = (uint32_t)j, /* region, for now */
			        .stack_id = v.stack_id,
			        .heap_id = v.heap_id,
			        .tid = v.tid,
			        .ts_ns = v.ts_ns};
		}
	}
	int rc = snapshot_take_regions(rs, nr, at_peak, s);
	if (rc) {
		free(b);
		return rc;
	}
	/* Each block to its stack's index in the dump.  A block whose
	 * stack has no allocation counted yet is one whose hook has not
	 * returned: in flight, like a busy slot. */
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		ssize_t at = stack_by_key(s, ((uint64_t)b[i].stack << 32) |
		                                     b[i].stack_id);
		if (at < 0) {
			busy++;
			continue;
		}
		b[k] = b[i];
		b[k].stack = (uint32_t)at;
		b[k].heap_id = s->stacks[at].heap_id;
		k++;
	}
	s->blocks = b;
	s->dump.blocks = b;
	s->dump.nblocks = k;
	s->blocks_in_flight = busy;
	return 0;
}

/* A relative module path: "./libx.so", "lib/libx.so" ("", "[vdso]" and
 * the vdso's "linux-vdso.so.1" are no file's). */
static bool relative_path(const char *path)
{
	return path[0] && path[0] != '/' && path[0] != '[' && strchr(path, '/');
}

/* Whether the file at path has rel's file name: what maps shows at a
 * module's address after the module was unloaded may be another file. (A
 * name that is a symbolic link does not match: cwd_path resolves it.) */
static bool same_file_name(const char *path, const char *rel)
{
	const char *a = strrchr(path, '/'), *b = strrchr(rel, '/');
	return !strcmp(a ? a + 1 : path, b ? b + 1 : rel);
}

/* cwd/path made canonical, into out (size PATH_MAX); false if there is no
 * such file. */
static bool cwd_path(const char *cwd, const char *path, char *out)
{
	char joined[2 * PATH_MAX];
	if (!cwd || cwd[0] != '/')
		return false;
	if ((size_t)snprintf(joined, sizeof(joined), "%s/%s", cwd, path) >=
	    sizeof(joined))
		return false;
	return realpath(joined, out) != NULL;
}

/*
 * The paths found, by process and module: a later dump names a module as
 * an earlier one did, also once the process is gone and the working
 * directory no longer leads to the file (it changed directory before the
 * dlopen).  Two dumps naming it differently would make two mappings, and
 * two frames for each of its addresses.  Bounded: when full, new ones are
 * not kept.
 */
#define PATH_CACHE_MAX 1024
static struct {
	pid_t pid;
	uint64_t start, base;
	char *rel, *abs;
} path_cache[PATH_CACHE_MAX];
static size_t path_cache_n;
static pthread_mutex_t path_cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* The path cached for module m of pid into out; false if none. */
static bool cached_path(pid_t pid, const struct prof_module *m, char *out)
{
	bool found = false;
	pthread_mutex_lock(&path_cache_lock);
	for (size_t i = 0; i < path_cache_n && !found; i++)
		if (path_cache[i].pid == pid &&
		    path_cache[i].start == m->start &&
		    path_cache[i].base == m->base &&
		    !strcmp(path_cache[i].rel, m->path)) {
			snprintf(out, PATH_MAX, "%s", path_cache[i].abs);
			found = true;
		}
	pthread_mutex_unlock(&path_cache_lock);
	return found;
}

static void cache_path(pid_t pid, const struct prof_module *m, const char *abs)
{
	pthread_mutex_lock(&path_cache_lock);
	if (path_cache_n < PATH_CACHE_MAX) {
		char *rel = strdup(m->path), *a = strdup(abs);
		if (rel && a) {
			path_cache[path_cache_n].pid = pid;
			path_cache[path_cache_n].start = m->start;
			path_cache[path_cache_n].base = m->base;
			path_cache[path_cache_n].rel = rel;
			path_cache[path_cache_n].abs = a;
			path_cache_n++;
		} else {
			free(rel);
			free(a);
		}
	}
	pthread_mutex_unlock(&path_cache_lock);
}

int snapshot_resolve_paths(struct snapshot *s, pid_t pid, bool alive,
                           const char *cwd)
{
	struct prof_module *mods = s->modules;
	for (size_t i = 0; i < s->dump.nmodules; i++) {
		if (!relative_path(mods[i].path))
			continue;
		char path[PATH_MAX];
		bool found = cached_path(pid, &mods[i], path);
		if (!found) {
			found = (alive &&
			         snapshot_proc_mapped_path(pid, mods[i].start,
			                                   path) &&
			         same_file_name(path, mods[i].path)) ||
			        cwd_path(cwd, mods[i].path, path);
			if (found)
				cache_path(pid, &mods[i], path);
		}
		if (!found)
			continue;
		char **grown =
		        realloc(s->paths, (s->npaths + 1) * sizeof(*s->paths));
		if (!grown)
			return -ENOMEM;
		s->paths = grown;
		if (!(s->paths[s->npaths] = strdup(path)))
			return -ENOMEM;
		mods[i].path = s->paths[s->npaths++];
	}
	return 0;
}

void snapshot_free(struct snapshot *s)
{
	for (size_t i = 0; i < s->npaths; i++)
		free(s->paths[i]);
	free(s->paths);
	free(s->blocks);
	free(s->modules);
	free(s->stacks);
	free(s->heaps);
	free(s->pcs);
	free(s->strings);
	free(s->build_ids);
	free(s->heap_names);
	memset(s, 0, sizeof(*s));
}

void snapshot_memory(const struct hp_region *r, pid_t pid, bool alive,
                     struct prof_memory *out)
{
	struct hp_memstat_v1 *ms = &r->hdr->memstat;
	struct prof_memory c = {0};

	memset(out, 0, sizeof(*out));
	if (alive && pid > 0)
		snapshot_proc_memory(pid, out);
	/* The client's reading at exit, if it finished writing one. */
	for (int tries = 0; tries < 4; tries++) {
		uint64_t s1 =
		        atomic_load_explicit(&ms->seq, memory_order_acquire);
		if (s1 & 1)
			continue;
		uint64_t ts =
		        atomic_load_explicit(&ms->ts_ns, memory_order_relaxed);
		uint64_t flags =
		        atomic_load_explicit(&ms->flags, memory_order_relaxed);
		c.rss = atomic_load_explicit(&ms->rss, memory_order_relaxed);
		c.rss_anon = atomic_load_explicit(&ms->rss_anon,
		                                  memory_order_relaxed);
		c.malloc_system = atomic_load_explicit(&ms->malloc_system,
		                                       memory_order_relaxed);
		c.malloc_in_use = atomic_load_explicit(&ms->malloc_in_use,
		                                       memory_order_relaxed);
		c.malloc_free = atomic_load_explicit(&ms->malloc_free,
		                                     memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&ms->seq, memory_order_relaxed) != s1)
			continue;
		if (!ts)
			break;
		if (!out->have_rss && (flags & HP_MEMSTAT_RSS)) {
			out->have_rss = 1;
			out->rss_source = "exit";
			out->rss = c.rss;
			out->rss_anon = c.rss_anon;
		}
		if (flags & HP_MEMSTAT_FOREIGN)
			out->malloc_foreign = 1;
		if (flags & HP_MEMSTAT_MALLOC) {
			out->have_malloc = 1;
			out->malloc_system = c.malloc_system;
			out->malloc_in_use = c.malloc_in_use;
			out->malloc_free = c.malloc_free;
		}
		break;
	}
}
