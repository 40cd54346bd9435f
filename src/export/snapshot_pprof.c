/*
 * The pprof of a snapshot (snapshot_pprof.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/pprof.h"
#include "export/snapshot_pprof.h"
#include "store/procinfo.h"
#include "store/schema.h"
#include "util/err.h"

/* A block's address label: "0x" and hex, as --contents-dir names the
 * block's file (inspect/contents.c). */
static void block_name(char *buf, size_t len, uint64_t addr)
{
	snprintf(buf, len, "0x%" PRIx64, addr);
}

/* One sample per leaf callsite: the blocks summed. */
static int add_aggregated(struct pp_profile *pp,
                          const struct snapshot_pprof_job *j,
                          const struct rd_block *b, size_t n)
{
	int err = 0;

	for (size_t i = 0; !err && i < n;) {
		int64_t bytes = 0, objs_fp = 0;
		size_t k = i;
		for (; k < n && b[k].callsite == b[i].callsite; k++) {
			bytes += b[k].charged;
			objs_fp += b[k].objects_fp;
		}
		int64_t objs = blocks_objects(objs_fp);
		int64_t v[RD_NVIEWS] = {[RD_SPACE] = bytes,
		                        [RD_ALLOC_SPACE] = bytes,
		                        [RD_OBJECTS] = objs,
		                        [RD_ALLOC_OBJECTS] = objs};
		err = pp_add_sample(pp, j->s, b[i].callsite, v, NULL, NULL);
		i = k;
	}
	return err;
}

/* One sample per block, labelled address, timestamp and thread. */
static int add_tagged(struct pp_profile *pp, const struct snapshot_pprof_job *j,
                      const struct rd_block *b, size_t n)
{
	int err = 0;

	for (size_t i = 0; !err && i < n; i++) {
		char addr[32];
		struct pp_label l[3];
		size_t nl = 0;
		block_name(addr, sizeof(addr), b[i].address);
		l[nl++] = (struct pp_label){.key = "address", .str = addr};
		/* 0: unknown (a v1 region): no label rather than a wrong
		 * one. */
		if (b[i].ts)
			l[nl++] = (struct pp_label){.key = "timestamp",
			                            .num = b[i].ts,
			                            .num_unit = "nanoseconds"};
		if (b[i].tid)
			l[nl++] = (struct pp_label){.key = "thread",
			                            .num = b[i].tid};
		int64_t objs = blocks_objects(b[i].objects_fp);
		int64_t v[RD_NVIEWS] = {[RD_SPACE] = b[i].charged,
		                        [RD_ALLOC_SPACE] = b[i].charged,
		                        [RD_OBJECTS] = objs,
		                        [RD_ALLOC_OBJECTS] = objs};
		/* A zero-byte block still counts as one object. */
		if (!b[i].charged && !objs)
			v[RD_OBJECTS] = v[RD_ALLOC_OBJECTS] = 1;
		err = pp_add_sample_labels(pp, j->s, b[i].callsite, v, l, nl);
	}
	return err;
}

int snapshot_pprof_write(struct snapshot_pprof_job *j, const char *subsys)
{
	const char *heap = j->heap ? j->heap : "libc.malloc";
	struct rd_block *b = NULL;
	size_t nb = 0;
	char *c1 = NULL, *c2 = NULL;
	int err = blocks_summary(j->db, subsys, j->d->id, &j->sum);
	struct pp_profile *pp = err ? NULL : pp_new(j->p->interval);

	if (!err && !pp)
		err = -ENOMEM;
	if (j->symtab)
		memset(j->symtab, 0, sizeof(*j->symtab));
	if (!err && j->go_names)
		pp_use_go_heap_names(pp);
	j->from_blocks = !err && j->sum.nblocks > 0;
	if (!err && j->from_blocks)
		err = blocks_load(j->db, subsys, j->d->id, heap, &b, &nb);
	if (!err && j->with_tags && !j->from_blocks)
		hp_log("heapprof: %s: this dump kept no blocks: the pprof has "
		       "one sample per call stack, without tags\n",
		       subsys);
	if (!err &&
	    (asprintf(&c1,
	              "heapprof snapshot%s%s%s of process %" PRId64
	              " (%s), heap %s: dump %zu of %zu in %s",
	              j->d->name ? " '" : "", j->d->name ? j->d->name : "",
	              j->d->name ? "'" : "", j->p->pid, j->p->name, heap,
	              j->dump_index, j->ndumps, j->file) < 0 ||
	     asprintf(&c2, "command line: %s", j->p->cmdline) < 0)) {
		c1 = c2 = NULL;
		err = -ENOMEM;
	}
	if (!err)
		err = pp_add_comment(pp, c1);
	if (!err)
		err = pp_add_comment(pp, c2);
	if (!err) {
		int64_t wall = j->wall_ns ? j->wall_ns
		                          : pi_wall_time_exact(j->db, j->d->ts);
		pp_set_time(pp, wall, j->d->ts - j->p->start_ts);
	}
	if (!err && j->from_blocks)
		err = j->with_tags ? add_tagged(pp, j, b, nb)
		                   : add_aggregated(pp, j, b, nb);
	else if (!err)
		err = pp_add_dump(pp, j->db, j->s, j->p->upid, heap, j->d->ts,
		                  0, NULL, subsys);
	if (err == -ENOMEM)
		hp_err(subsys, "out of memory");
	if (!err)
		j->nsamples = pp_nsamples(pp);
	if (!err && j->symtab && (err = pp_symtab_make(pp, j->symtab)) < 0)
		hp_err(subsys, "out of memory");
	if (!err)
		err = pp_write_gz(pp, j->path, subsys);
	if (err && j->symtab)
		pp_symtab_free(j->symtab);
	free(b);
	free(c1);
	free(c2);
	pp_free(pp);
	return err ? -1 : 0;
}

int snapshot_pprof_of_db(const char *db_path, const char *out, const char *heap,
                         unsigned flags, uint64_t wall, size_t *nsamples,
                         struct pp_symtab *symtab, const char *subsys)
{
	sqlite3 *db = rd_open(db_path, subsys);
	struct rd_stacks s;
	struct rd_process *procs = NULL;
	struct rd_dump *d = NULL;
	size_t np = 0, nd = 0;
	int err = db ? 0 : -1;

	memset(&s, 0, sizeof(s));
	if (!err)
		err = rd_load_stacks(db, subsys, &s);
	if (!err)
		err = rd_load_processes(db, subsys, &procs, &np);
	if (!err && np == 1)
		err = rd_load_dumps(db, subsys, procs[0].upid, &d, &nd);
	if (!err && (np != 1 || nd != 1)) {
		hp_err(subsys, "%s: unexpected contents", db_path);
		err = -1;
	}
	if (!err) {
		struct snapshot_pprof_job j = {
		        .db = db,
		        .s = &s,
		        .p = &procs[0],
		        .d = &d[0],
		        .dump_index = 1,
		        .ndumps = 1,
		        .file = db_path,
		        .heap = heap,
		        .with_tags = (flags & SNAPSHOT_PPROF_TAGS) != 0,
		        .wall_ns = (int64_t)wall,
		        .path = out,
		        .go_names = (flags & SNAPSHOT_PPROF_GO_NAMES) != 0,
		        .symtab = symtab,
		};
		err = snapshot_pprof_write(&j, subsys);
		*nsamples = j.nsamples;
	}
	rd_free_dumps(d, nd);
	rd_free_processes(procs, np);
	rd_free_stacks(&s);
	if (db)
		sqlite3_close(db);
	return err ? -1 : 0;
}
