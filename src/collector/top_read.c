/*
 * `heapprof top`'s readings (top_read.h): the regions found and mapped by
 * live_snapshot_open, their stacks copied by snapshot_take_regions, summed
 * per leaf function with names from the symbol tables.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collector/live_snapshot.h"
#include "collector/snapshot_proc.h"
#include "collector/top_read.h"
#include "symbolize/symbolize.h"
#include "util/grow.h"
#include "util/hmap.h"
#include "util/proc.h"

/* A cgroup limit at or above this is "no limit" (v1 writes
 * PAGE_COUNTER_MAX pages, 2^63 rounded down to a page). */
#define LIMIT_NONE (UINT64_C(1) << 62)

struct top_reader {
	pid_t pid;
	struct symbolizer *sym;
	char **names; /* by index */
	size_t nnames, capnames;
	struct hmap by_name;   /* name -> index */
	struct hmap by_pc;     /* return address -> name index */
	uint64_t modules_hash; /* of the modules the pc cache is for */
	bool all_heaps;
};

struct top_reader *top_reader_new(pid_t pid)
{
	struct top_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->pid = pid;
	hmap_init(&r->by_name);
	hmap_init(&r->by_pc);
	r->sym = symbolizer_new();
	if (!r->sym) {
		free(r);
		return NULL;
	}
	return r;
}

void top_reader_all_heaps(struct top_reader *r)
{
	r->all_heaps = true;
}

void top_reader_free(struct top_reader *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nnames; i++)
		free(r->names[i]);
	free(r->names);
	hmap_free(&r->by_name);
	hmap_free(&r->by_pc);
	symbolizer_free(r->sym);
	free(r);
}

const char *top_name(const struct top_reader *r, uint32_t name)
{
	return name < r->nnames ? r->names[name] : "?";
}

/* The index of name (interned).  0 or -ENOMEM. */
static int intern(struct top_reader *r, const char *name, uint32_t *out)
{
	size_t len = strlen(name);
	int64_t *found = hmap_find(&r->by_name, name, len);
	if (found) {
		*out = (uint32_t)*found;
		return 0;
	}
	char **v = hp_grow(r->names, &r->capnames, r->nnames, sizeof(*v));
	if (!v)
		return -ENOMEM;
	r->names = v;
	char *copy = strdup(name);
	if (!copy || hmap_put(&r->by_name, name, len, (int64_t)r->nnames)) {
		free(copy);
		return -ENOMEM;
	}
	r->names[r->nnames] = copy;
	*out = (uint32_t)r->nnames++;
	return 0;
}

/* FNV-1a over the modules (their addresses a word at a time): a module
 * loaded or unloaded since the last reading invalidates the names by
 * address. */
static uint64_t modules_hash(const struct prof_dump *d)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < d->nmodules; i++) {
		const struct prof_module *m = &d->modules[i];
		uint64_t v[3] = {m->start, m->end, m->base};
		for (size_t k = 0; k < 3; k++)
			h = (h ^ v[k]) * 1099511628211ull;
		for (const char *p = m->path; *p; p++)
			h = (h ^ (unsigned char)*p) * 1099511628211ull;
	}
	return h;
}

/* The function holding return address pc, as the profile writer names
 * it (symbolizer_lookup at pc - base); "module+0xREL" when the symbol
 * tables do not say, "[unknown]" outside every module. */
static int name_pc(struct top_reader *r, const struct prof_dump *d, uint64_t pc,
                   uint32_t *out)
{
	int64_t *found = hmap_find(&r->by_pc, &pc, sizeof(pc));
	if (found) {
		*out = (uint32_t)*found;
		return 0;
	}
	const struct prof_module *m = NULL;
	for (size_t i = 0; i < d->nmodules && pc; i++)
		if (pc - 1 >= d->modules[i].start && pc - 1 < d->modules[i].end)
			m = &d->modules[i];
	struct sym_result sym = {NULL, NULL};
	char buf[PATH_MAX + 32];
	const char *name = "[unknown]";
	int err = 0;
	if (m)
		err = symbolizer_lookup(r->sym, m->path, m->build_id,
		                        m->build_id_len, pc - m->base, &sym);
	if (err)
		return err;
	if (sym.name) {
		name = sym.name;
	} else if (m) {
		const char *slash = strrchr(m->path, '/');
		snprintf(buf, sizeof(buf), "%s+0x%" PRIx64,
		         slash        ? slash + 1
		         : m->path[0] ? m->path
		                      : "?",
		         pc - m->base);
		name = buf;
	}
	err = intern(r, name, out);
	sym_result_fini(&sym);
	if (!err)
		err = hmap_put(&r->by_pc, &pc, sizeof(pc), *out);
	return err;
}

/* ---- the memory limit ---------------------------------------------------- */

/* A limit file's value: "max" (v2) or a huge number (v1) is none (0). */
static bool read_limit(const char *path, uint64_t *out)
{
	FILE *f = fopen(path, "re");
	char line[64];
	if (!f)
		return false;
	bool ok = fgets(line, sizeof(line), f) != NULL;
	fclose(f);
	if (!ok)
		return false;
	if (!strncmp(line, "max", 3)) {
		*out = 0;
		return true;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(line, &end, 10);
	if (errno || end == line)
		return false;
	*out = v >= LIMIT_NONE ? 0 : v;
	return true;
}

/*
 * The memory limit of pid's cgroup: v2 memory.max of its "0::" cgroup,
 * else v1 memory.limit_in_bytes of its memory controller's.  In a cgroup
 * namespace the path /proc shows is relative to the namespace's root,
 * which is where /sys/fs/cgroup is mounted from: so when the full path is
 * not there, the root's own file is the process's.
 */
static void memory_limit(pid_t pid, struct top_reading *t)
{
	static const char v2_max[] = "cgroup v2 memory.max";
	static const char v1_limit[] = "cgroup v1 memory.limit_in_bytes";
	char cg[PATH_MAX], path[PATH_MAX + 64];

	if (proc_cgroup(pid, cg, sizeof(cg)) == 0 && strcmp(cg, "/") != 0) {
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max", cg);
		if (read_limit(path, &t->limit)) {
			t->limit_src = v2_max;
			return;
		}
	}
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	FILE *f = fopen(path, "re");
	char line[PATH_MAX + 64];
	cg[0] = '\0';
	while (f && fgets(line, sizeof(line), f)) {
		/* "N:controllers:path", the controllers comma-separated. */
		char *a = strchr(line, ':');
		char *b = a ? strchr(a + 1, ':') : NULL;
		if (!b)
			continue;
		*b = '\0';
		char *ctl = a + 1, *save = NULL;
		bool mem = false;
		for (char *w = strtok_r(ctl, ",", &save); w;
		     w = strtok_r(NULL, ",", &save))
			mem = mem || !strcmp(w, "memory");
		if (mem) {
			snprintf(cg, sizeof(cg), "%s", b + 1);
			cg[strcspn(cg, "\n")] = '\0';
		}
	}
	if (f)
		fclose(f);
	if (cg[0]) {
		snprintf(path, sizeof(path),
		         "/sys/fs/cgroup/memory%s/memory.limit_in_bytes",
		         strcmp(cg, "/") ? cg : "");
		if (read_limit(path, &t->limit) ||
		    read_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes",
		               &t->limit)) {
			t->limit_src = v1_limit;
			return;
		}
	}
	if (read_limit("/sys/fs/cgroup/memory.max", &t->limit))
		t->limit_src = v2_max;
}

/* ---- a reading ----------------------------------------------------------- */

int64_t top_value(const struct top_counts *c, enum top_view v)
{
	uint64_t half = HP_OBJ_FP_ONE / 2;
	int64_t ao = (int64_t)((c->alloc_objs_fp + half) / HP_OBJ_FP_ONE);
	int64_t fo = (int64_t)((c->free_objs_fp + half) / HP_OBJ_FP_ONE);
	switch (v) {
	case TOP_SPACE:
		return (int64_t)c->alloc_bytes - (int64_t)c->free_bytes;
	case TOP_OBJECTS:
		return ao - fo;
	case TOP_ALLOC_SPACE:
		return (int64_t)c->alloc_bytes;
	case TOP_ALLOC_OBJECTS:
	case TOP_NVIEWS:
		break;
	}
	return ao;
}

static void add(struct top_counts *to, const struct prof_stack *s)
{
	to->alloc_bytes += s->alloc_bytes;
	to->free_bytes += s->free_bytes;
	to->alloc_objs_fp += s->alloc_objects_fp;
	to->free_objs_fp += s->free_objects_fp;
}

static int by_heap_name(const void *a, const void *b)
{
	const struct top_func *x = a, *y = b;
	if (x->heap != y->heap)
		return x->heap < y->heap ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

const struct top_func *top_find(const struct top_reading *t, uint32_t name)
{
	struct top_func key = {.heap = 0, .name = name};
	if (!t->nfuncs)
		return NULL;
	return bsearch(&key, t->funcs, t->nfuncs, sizeof(key), by_heap_name);
}

/* The heap of id in t, added (named from d) when new; NULL: no memory. */
static struct top_heap *heap_of(struct top_reading *t,
                                const struct prof_dump *d, uint32_t id)
{
	for (size_t i = 0; i < t->nheaps; i++)
		if (t->heaps[i].id == id)
			return &t->heaps[i];
	struct top_heap *v = realloc(t->heaps, (t->nheaps + 1) * sizeof(*v));
	if (!v)
		return NULL;
	t->heaps = v;
	struct top_heap *h = &v[t->nheaps++];
	memset(h, 0, sizeof(*h));
	h->id = id;
	const char *name =
	        id < d->nheaps && d->heaps[id].name && d->heaps[id].name[0]
	                ? d->heaps[id].name
	                : NULL;
	if (name)
		snprintf(h->name, sizeof(h->name), "%s", name);
	else
		snprintf(h->name, sizeof(h->name), "heap%" PRIu32, id);
	/* 0: the process's interval (hp_heap_select_interval) */
	h->interval = id < d->nheaps ? d->heaps[id].interval : 0;
	if (!h->interval)
		h->interval = t->interval;
	return h;
}

/* Adds stack s to its function (the leaf's) in t; index: name -> func. */
static int add_stack(struct top_reader *r, const struct prof_dump *d,
                     const struct prof_stack *s, struct hmap *index,
                     struct top_reading *t, size_t *cap)
{
	uint32_t leaf;
	int err;
	if (s->flags & HP_STACK_OVERFLOW)
		err = intern(r, "[stack table full]", &leaf);
	else if (s->nframes == 0)
		err = intern(r, "[empty stack]", &leaf);
	else
		err = name_pc(r, d, s->pcs[0], &leaf);
	if (err)
		return err;
	uint64_t key = (uint64_t)s->heap_id << 32 | leaf;
	int64_t *at = hmap_find(index, &key, sizeof(key));
	struct top_func *f;
	if (at) {
		f = &t->funcs[*at];
	} else {
		struct top_func *v =
		        hp_grow(t->funcs, cap, t->nfuncs, sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->funcs = v;
		if (hmap_put(index, &key, sizeof(key), (int64_t)t->nfuncs))
			return -ENOMEM;
		f = &t->funcs[t->nfuncs++];
		memset(f, 0, sizeof(*f));
		f->heap = s->heap_id;
		f->name = leaf;
		f->best_live = -1;
	}
	add(&f->c, s);
	int64_t live = s->alloc_bytes > s->free_bytes
	                       ? (int64_t)(s->alloc_bytes - s->free_bytes)
	                       : 0;
	/* The callers of the stack holding the most; of stacks alike, the
	 * first. */
	if (live <= f->best_live)
		return 0;
	f->best_live = live;
	f->ncallers = 0;
	for (uint32_t k = 1; k < s->nframes && f->ncallers < TOP_CALLERS; k++) {
		err = name_pc(r, d, s->pcs[k], &f->callers[f->ncallers]);
		if (err)
			return err;
		f->ncallers++;
	}
	return 0;
}

int top_read(struct top_reader *r, struct top_reading *out, char *why,
             size_t len)
{
	struct live_snapshot ls;
	struct hmap index;
	size_t cap = 0;

	memset(out, 0, sizeof(*out));
	hmap_init(&index);
	int err = live_snapshot_open(r->pid, &ls);
	if (err == -1)
		snprintf(why, len, "%s", ls.why);
	if (err)
		goto out;
	out->ts = hp_clock_ns(CLOCK_BOOTTIME);
	/* The per-stack counters only: the live blocks are not needed. */
	err = snapshot_take_regions(ls.rs, ls.nr, &ls.snap);
	if (!err)
		err = snapshot_resolve_paths(&ls.snap, r->pid, true, NULL);
	if (err)
		goto out;
	const struct prof_dump *d = &ls.snap.dump;
	out->interval = live_snapshot_interval(&ls);
	uint64_t mh = modules_hash(d);
	if (mh != r->modules_hash) {
		hmap_free(&r->by_pc);
		hmap_init(&r->by_pc);
		r->modules_hash = mh;
	}
	memcpy(out->counters, d->counters, sizeof(out->counters));
	struct top_heap *malloc_heap = heap_of(out, d, 0);
	if (!malloc_heap) {
		err = -ENOMEM;
		goto out;
	}
	malloc_heap->interval = out->interval;
	for (size_t i = 0; i < d->nstacks && !err; i++) {
		const struct prof_stack *s = &d->stacks[i];
		/* libc.malloc, the heap `heapprof report` shows by default;
		 * the others when asked. */
		if (s->heap_id != 0 && !r->all_heaps)
			continue;
		struct top_heap *h = heap_of(out, d, s->heap_id);
		if (!h) {
			err = -ENOMEM;
			break;
		}
		add(&h->total, s);
		if (s->heap_id == 0)
			add(&out->total, s);
		err = add_stack(r, d, s, &index, out, &cap);
	}
	if (err)
		goto out;
	if (out->nfuncs) /* funcs is NULL before the first */
		qsort(out->funcs, out->nfuncs, sizeof(*out->funcs),
		      by_heap_name);
	struct prof_memory m;
	memset(&m, 0, sizeof(m));
	if (snapshot_proc_memory(r->pid, &m) == 0) {
		out->have_rss = true;
		out->rss = m.rss;
		out->rss_peak = m.have_peak ? m.rss_peak : 0;
	}
	memory_limit(r->pid, out);
	for (int i = 0; i < ls.nr; i++)
		out->tables +=
		        region_resident(-1, ls.rs[i]->base, ls.rs[i]->size);
out:
	hmap_free(&index);
	live_snapshot_close(&ls);
	if (err)
		top_reading_free(out);
	return err;
}

void top_reading_free(struct top_reading *t)
{
	free(t->funcs);
	t->funcs = NULL;
	t->nfuncs = 0;
	free(t->heaps);
	t->heaps = NULL;
	t->nheaps = 0;
}
