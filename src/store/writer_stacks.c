/*
 * The profile writer (writer.c): mappings, frames and callsites.  Each is
 * interned in memory (hash maps from its identity to the row id we
 * assigned), so its row is written once, by a job of the work queue
 * (workq.h); a frame is named when first seen.  A dump's stacks become
 * callsites here (wr_intern_stacks): each return address to the frame of
 * the dump's module holding it, outermost frame first.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "store/writer_int.h"
#include "symbolize/symbolize.h"
#include "util/grow.h"
#include "util/err.h"

/* Synthetic frames and pseudo mappings: profile.h's PROF_FRAME_*,
 * PROF_MAPPING_*. */
#define FRAME_STACK_FULL_NAME PROF_FRAME_STACK_FULL
#define FRAME_EMPTY_NAME      PROF_FRAME_EMPTY
#define MAPPING_HEAPPROF      PROF_MAPPING_HEAPPROF
#define MAPPING_UNKNOWN       PROF_MAPPING_UNKNOWN

struct mapping_row {
	const char *name;
	const uint8_t *build_id;
	uint32_t build_id_len;
	uint64_t start, end, base, load_bias, exact_offset;
};

/* Identity of a mapping: every column, plus the base rel_pc depends on. */
static uint8_t *mapping_key(const struct mapping_row *m, size_t *len)
{
	uint64_t hdr[6] = {m->start,     m->end,          m->base,
	                   m->load_bias, m->exact_offset, m->build_id_len};
	size_t nlen = strlen(m->name);
	uint8_t *key = malloc(sizeof(hdr) + m->build_id_len + nlen);

	if (!key)
		return NULL;
	memcpy(key, hdr, sizeof(hdr));
	if (m->build_id_len)
		memcpy(key + sizeof(hdr), m->build_id, m->build_id_len);
	memcpy(key + sizeof(hdr) + m->build_id_len, m->name, nlen);
	*len = sizeof(hdr) + m->build_id_len + nlen;
	return key;
}

/* A row for the work queue: the strings are the job's own. */
struct mapping_job {
	struct profile *p;
	int64_t id, exact_offset, start, end, load_bias;
	char *name;
	char *resolved; /* realpath of name where it differs; else NULL */
	char build_id[2 * 256 + 1]; /* hex; "" if none */
};

static void drop_mapping(void *arg)
{
	struct mapping_job *j = arg;
	free(j->name);
	free(j->resolved);
	free(j);
}

static int run_mapping(void *arg)
{
	struct mapping_job *j = arg;
	sqlite3_stmt *st = j->p->st[ST_MAPPING];

	sqlite3_bind_int64(st, 1, j->id);
	if (j->build_id[0])
		sqlite3_bind_text(st, 2, j->build_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, j->exact_offset);
	sqlite3_bind_int64(st, 4, j->start);
	sqlite3_bind_int64(st, 5, j->end);
	sqlite3_bind_int64(st, 6, j->load_bias);
	sqlite3_bind_text(st, 7, j->name, -1, SQLITE_STATIC);
	if (j->resolved)
		sqlite3_bind_text(st, 8, j->resolved, -1, SQLITE_STATIC);
	int err = step(j->p, ST_MAPPING, "writing mapping");
	drop_mapping(j);
	return err;
}

static int insert_mapping(struct profile *p, int64_t id,
                          const struct mapping_row *m)
{
	struct mapping_job *j = calloc(1, sizeof(*j));
	if (!j || !(j->name = strdup(m->name))) {
		free(j);
		return -ENOMEM;
	}
	j->p = p;
	j->id = id;
	/* The file a module's name leads to, when the name goes through a
	 * symbolic link (the main program started through one keeps the
	 * name it was started by).  Read where the profile is written: the
	 * process's machine. */
	if (m->name[0] == '/') {
		j->resolved = realpath(m->name, NULL);
		if (j->resolved && !strcmp(j->resolved, m->name)) {
			free(j->resolved);
			j->resolved = NULL;
		}
	}
	if (m->build_id_len && m->build_id_len <= 256)
		symbolize_hex(j->build_id, m->build_id, m->build_id_len);
	j->exact_offset = i64(m->exact_offset);
	j->start = i64(m->start);
	j->end = i64(m->end);
	j->load_bias = i64(m->load_bias);
	return jobq_submit(&p->wq, run_mapping, NULL, drop_mapping, j, 0, 0);
}

static int intern_mapping(struct profile *p, const struct mapping_row *m,
                          int64_t *id)
{
	size_t klen = 0;
	uint8_t *key = mapping_key(m, &klen);
	int err = 0;

	if (!key)
		return -ENOMEM;
	int64_t *found = hmap_find(&p->mappings, key, klen);
	if (found) {
		*id = *found;
	} else {
		*id = p->next.mapping;
		err = insert_mapping(p, *id, m);
		if (!err)
			err = hmap_put(&p->mappings, key, klen, *id);
		if (!err)
			p->next.mapping++;
	}
	free(key);
	return err;
}

static int intern_special_mapping(struct profile *p, const char *name,
                                  int64_t *id)
{
	struct mapping_row m = {.name = name};
	return intern_mapping(p, &m, id);
}

struct frame_job {
	struct profile *p;
	int64_t id, mapping, rel_pc;
	struct sym_result sym; /* the job's own */
};

static void drop_frame(void *arg)
{
	struct frame_job *j = arg;
	sym_result_fini(&j->sym);
	free(j);
}

static int run_frame(void *arg)
{
	struct frame_job *j = arg;
	sqlite3_stmt *st = j->p->st[ST_FRAME];

	sqlite3_bind_int64(st, 1, j->id);
	if (j->sym.name)
		sqlite3_bind_text(st, 2, j->sym.name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, j->mapping);
	sqlite3_bind_int64(st, 4, j->rel_pc);
	if (j->sym.system_name)
		sqlite3_bind_text(st, 5, j->sym.system_name, -1, SQLITE_STATIC);
	int err = step(j->p, ST_FRAME, "writing frame");
	drop_frame(j);
	return err;
}

/* Queue the frame's row; its names are taken from *sym (left empty). */
static int insert_frame(struct profile *p, int64_t id, int64_t mapping,
                        uint64_t rel_pc, struct sym_result *sym)
{
	struct frame_job *j = malloc(sizeof(*j));
	if (!j)
		return -ENOMEM;
	*j = (struct frame_job){p, id, mapping, i64(rel_pc), *sym};
	*sym = (struct sym_result){NULL, NULL};
	return jobq_submit(&p->wq, run_frame, NULL, drop_frame, j, 0, 0);
}

/*
 * Intern frame (mapping, rel_pc).  On first sight, name it: `fixed` for
 * synthetic frames, else from module `mod` (NULL: unknown).
 */
static int intern_frame(struct profile *p, int64_t mapping, uint64_t rel_pc,
                        const struct prof_module *mod, const char *fixed,
                        int64_t *id)
{
	int64_t key[2] = {mapping, i64(rel_pc)};
	int64_t *found = hmap_find(&p->frames, key, sizeof(key));
	struct sym_result sym = {NULL, NULL};
	int err = 0;

	if (found) {
		*id = *found;
		return 0;
	}
	if (fixed) {
		sym.name = strdup(fixed);
		if (!sym.name)
			return -ENOMEM;
	} else if (mod) {
		err = symbolizer_lookup(p->sym, mod->path, mod->build_id,
		                        mod->build_id_len, rel_pc, &sym);
		if (err)
			return err;
	}
	*id = p->next.frame;
	err = insert_frame(p, *id, mapping, rel_pc, &sym);
	if (!err)
		err = hmap_put(&p->frames, key, sizeof(key), *id);
	if (!err)
		p->next.frame++;
	sym_result_fini(&sym); /* empty unless insert_frame failed */
	return err;
}

/*
 * The callsite (parent, frame): found, or given the next id and queued in
 * new_cs for wr_write_callsites.  Ids start at 1; parent 0 means a root.
 */
static int intern_callsite(struct profile *p, int64_t parent, int64_t frame,
                           uint32_t depth, int64_t *id)
{
	int64_t found = pairmap_get(&p->callsites, parent, frame);
	if (found) {
		*id = found;
		return 0;
	}
	struct callsite_row *rows =
	        hp_grow(p->new_cs, &p->capnew_cs, p->nnew_cs, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	p->new_cs = rows;
	bool added;
	struct pairmap_slot *sl =
	        pairmap_slot(&p->callsites, parent, frame, &added);
	if (!sl)
		return -ENOMEM;
	sl->v = *id = p->next.callsite++;
	rows[p->nnew_cs++] = (struct callsite_row){depth, parent, frame};
	return 0;
}

struct callsite_job {
	struct profile *p;
	struct callsite_row *rows;
	size_t n;
	int64_t last; /* the id of the last row */
};

static void drop_callsites(void *arg)
{
	struct callsite_job *j = arg;
	free(j->rows);
	free(j);
}

/* One statement for the rows; their ids follow the table's last (SQLite's
 * next rowid), as intern_callsite numbered them. */
static int run_callsites(void *arg)
{
	struct callsite_job *j = arg;
	struct profile *p = j->p;

	p->bulk[BK_CALLSITE].rows = j->rows;
	p->bulk[BK_CALLSITE].nrows = j->n;
	int err = step(p, ST_CALLSITE, "writing callsites");
	p->bulk[BK_CALLSITE].nrows = 0;
	if (!err && sqlite3_last_insert_rowid(p->db) != j->last) {
		hp_log(SUBSYS "writing callsites: ids out of step (%lld,"
		              " expected %lld)\n",
		       (long long)sqlite3_last_insert_rowid(p->db),
		       (long long)j->last);
		err = -EIO;
	}
	drop_callsites(j);
	return err;
}

/* Hand the callsites interned so far to a job. */
int wr_write_callsites(struct profile *p)
{
	if (!p->nnew_cs)
		return 0;
	struct callsite_job *j = malloc(sizeof(*j));
	if (!j)
		return -ENOMEM;
	*j = (struct callsite_job){p, p->new_cs, p->nnew_cs,
	                           p->next.callsite - 1};
	p->new_cs = NULL;
	p->nnew_cs = p->capnew_cs = 0;
	return jobq_submit(&p->wq, run_callsites, NULL, drop_callsites, j, 0,
	                   0);
}

/* Index of the module holding address a, or -1. */
static ssize_t module_of(const struct dump_ctx *c, uint64_t a)
{
	const struct prof_module *mods = c->d->modules;
	size_t lo = 0, hi = c->d->nmodules;

	/* Last module whose start <= a. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (mods[c->order[mid]].start <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -1;
	size_t i = c->order[lo - 1];
	return a < mods[i].end ? (ssize_t)i : -1;
}

static int module_mapping(struct dump_ctx *c, size_t i, int64_t *id)
{
	const struct prof_module *m = &c->d->modules[i];

	if (c->map_ids[i]) {
		*id = c->map_ids[i];
		return 0;
	}
	struct mapping_row row = {
	        .name = m->path ? m->path : "",
	        .build_id = m->build_id,
	        .build_id_len = m->build_id ? m->build_id_len : 0,
	        .start = m->start,
	        .end = m->end,
	        .base = m->base,
	        .load_bias = m->load_bias,
	        .exact_offset = m->exact_offset,
	};
	int err = intern_mapping(c->p, &row, id);
	if (!err)
		c->map_ids[i] = *id;
	return err;
}

static int pc_frame_slow(struct dump_ctx *c, uint64_t pc, int64_t *frame)
{
	int64_t mapping;
	/* A return address: the call is in the byte before it. */
	ssize_t i = pc ? module_of(c, pc - 1) : -1;
	int err;

	if (i < 0) {
		err = intern_special_mapping(c->p, MAPPING_UNKNOWN, &mapping);
		return err ? err
		           : intern_frame(c->p, mapping, pc, NULL, NULL, frame);
	}
	const struct prof_module *m = &c->d->modules[i];
	err = module_mapping(c, (size_t)i, &mapping);
	return err ? err
	           : intern_frame(c->p, mapping, pc - m->base, m, NULL, frame);
}

/* The frame of return address pc in this dump's modules. */
static int pc_frame(struct dump_ctx *c, uint64_t pc, int64_t *frame)
{
	/* First a small direct-mapped cache: a dump's stacks share most of
	 * their pcs, so this answers nearly every call with one compare. */
	struct pc_hit *hit = &c->pc_cache[(pc ^ pc >> 9) % PC_CACHE];
	if (hit->frame && hit->pc == pc) {
		*frame = hit->frame;
		return 0;
	}
	int64_t id = pairmap_get(&c->pc_frames, i64(pc), 0);
	if (!id) {
		int err = pc_frame_slow(c, pc, &id);
		if (err)
			return err;
		bool added;
		struct pairmap_slot *sl =
		        pairmap_slot(&c->pc_frames, i64(pc), 0, &added);
		if (!sl)
			return -ENOMEM;
		sl->v = id;
	}
	*hit = (struct pc_hit){pc, id};
	*frame = id;
	return 0;
}

static bool special_stack(const struct prof_stack *s)
{
	return (s->flags & HP_STACK_OVERFLOW) || s->nframes == 0 || !s->pcs;
}

/* The callsite of a stack that stands for samples without frames. */
static int special_callsite(struct dump_ctx *c, const struct prof_stack *s,
                            int64_t *leaf)
{
	int64_t frame, mapping;
	int full = (s->flags & HP_STACK_OVERFLOW) != 0;
	int err = intern_special_mapping(c->p, MAPPING_HEAPPROF, &mapping);
	if (!err)
		err = intern_frame(c->p, mapping, full ? 0 : 1, NULL,
		                   full ? FRAME_STACK_FULL_NAME
		                        : FRAME_EMPTY_NAME,
		                   &frame);
	return err ? err : intern_callsite(c->p, 0, frame, 0, leaf);
}

/*
 * Intern every stack's callsites, outermost first; c->leaf[i] gets stack
 * i's last one.  A stack's lookups depend on each other (a callsite's key
 * holds its parent), and in a big dump most of them miss the cache, so
 * stacks go in groups of INTERN_GROUP, one depth at a time: the slots of
 * the whole group are prefetched before the first is probed.
 */
#define INTERN_GROUP 16
int wr_intern_stacks(struct dump_ctx *c, const struct proc_state *ps,
                     size_t from, size_t to)
{
	const struct prof_dump *d = c->d;
	struct profile *p = c->p;
	size_t idx[INTERN_GROUP];
	int64_t parent[INTERN_GROUP], frame[INTERN_GROUP];
	uint64_t pcs[INTERN_GROUP];
	bool same[INTERN_GROUP];
	int err = 0;

	for (size_t next = from; next < to;) {
		size_t n = 0;
		uint32_t deepest = 0;
		while (n < INTERN_GROUP && next < to) {
			const struct prof_stack *s = &d->stacks[next];
			if (special_stack(s)) {
				err = special_callsite(c, s, &c->leaf[next++]);
				if (err)
					return err;
				continue;
			}
			/* Key 0: not a region's stack (tests, old callers):
			 * interned every time, never remembered. */
			int64_t known = s->key ? pairmap_get(&ps->stack_leaf,
			                                     i64(s->key), 0)
			                       : 0;
			if (known) {
				c->leaf[next++] = known;
				continue;
			}
			if (s->key && !c->new_leaf) {
				c->new_leaf = malloc(d->nstacks *
				                     sizeof(*c->new_leaf));
				if (!c->new_leaf)
					return -ENOMEM;
			}
			if (s->key)
				c->new_leaf[c->nnew_leaf++] = next;
			idx[n] = next++;
			parent[n] = 0;
			if (s->nframes > deepest)
				deepest = s->nframes;
			n++;
		}
		for (uint32_t depth = 0; depth < deepest; depth++) {
			for (size_t g = 0; g < n; g++) {
				const struct prof_stack *s = &d->stacks[idx[g]];
				same[g] = false;
				if (depth >= s->nframes)
					continue;
				uint64_t pc = s->pcs[s->nframes - 1 - depth];
				pcs[g] = pc;
				/* The previous stack's callsite when both
				 * got here by the same path to the same pc:
				 * stacks next to each other often share
				 * their outer frames. */
				if (g &&
				    depth < d->stacks[idx[g - 1]].nframes &&
				    parent[g] == parent[g - 1] &&
				    pc == pcs[g - 1]) {
					same[g] = true;
					continue;
				}
				err = pc_frame(c, pc, &frame[g]);
				if (err)
					return err;
				pairmap_prefetch(&p->callsites, parent[g],
				                 frame[g]);
			}
			for (size_t g = 0; g < n; g++) {
				if (depth >= d->stacks[idx[g]].nframes)
					continue;
				if (same[g]) {
					parent[g] = parent[g - 1];
					continue;
				}
				err = intern_callsite(p, parent[g], frame[g],
				                      depth, &parent[g]);
				if (err)
					return err;
			}
		}
		for (size_t g = 0; g < n; g++)
			c->leaf[idx[g]] = parent[g];
	}
	return 0;
}
