/*
 * pprof profile builder (see pprof.h).  Everything is kept in flat arrays
 * while samples are added, with hash maps to share strings, mappings,
 * locations and functions; the protobuf-c messages are only assembled in
 * pp_encode, pointing into those arrays.
 *
 * Addresses: a frame's rel_pc is an ELF virtual address of its module.  The
 * writer records, per executable segment, where it was mapped (start), its
 * page-aligned file offset (exact_offset) and p_vaddr - p_offset
 * (load_bias), so the segment's first byte has ELF address
 * exact_offset + load_bias and the module's ELF address 0 was at
 * start - exact_offset - load_bias.  pprof wants absolute addresses plus
 * the mapping's [start, limit) and file offset, from which it finds the
 * file offset of an address again.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "export/pprof.h"
#include "export/profile.pb-c.h"
#include "model/state.h"
#include "model/tree.h"
#include "util/pairmap.h"
#include "util/err.h"
#include "util/hmap.h"

struct pp_mapping {
	uint64_t start, limit, offset;
	int64_t filename, build_id;
	size_t nlocs, named, offline; /* locations; with lines; offline */
};

struct pp_location {
	uint64_t mapping; /* pprof id (index + 1) or 0 */
	uint64_t address;
	size_t line_off, nlines;
};

struct pp_line {
	uint64_t function; /* pprof id */
	int64_t line;
};

struct pp_function {
	int64_t name, system_name, filename;
};

/* A label: string indices key, str (0 for a numeric label), num_unit. */
struct pp_lab {
	int64_t key, str, num, unit;
};

struct pp_sample {
	size_t loc_off, nlocs;
	int64_t v[RD_NVIEWS];
	size_t label_off, nlabels; /* into labels */
};

/* A growable array: `T *a; size_t n, cap;` in one struct. */
#define ARRAY(T)                                                               \
	struct {                                                               \
		T *a;                                                          \
		size_t n, cap;                                                 \
	}

struct pp_profile {
	int64_t period, time_nanos, duration_nanos;
	ARRAY(char *) strs;
	ARRAY(const struct rd_stacks *) srcs;
	ARRAY(struct tree *) trees; /* the heap model's tree of each source */
	ARRAY(struct pp_mapping) maps;
	ARRAY(struct pp_location) locs;
	ARRAY(struct pp_line) lines;
	ARRAY(struct pp_function) fns;
	ARRAY(struct pp_sample) samples;
	ARRAY(uint64_t) stack_ids; /* location ids of all samples */
	ARRAY(struct pp_lab) labels;
	ARRAY(int64_t) comments;
	struct hmap str_idx, map_idx, fn_idx;
	/* The sample types' names (pp_use_go_heap_names); NULL: heapprof's */
	const char *const *view_names;
	/* (source, frame id) -> location index + 1 */
	struct pairmap loc_idx;
	/* (source, leaf callsite) -> its location ids in stack_ids, as
	 * (offset << 16 | count) + 1: samples of one call stack (one per
	 * block with labels) share them. */
	struct pairmap stack_idx;
};

/* Make room for one more element in arr; 0 or -ENOMEM. */
#define RESERVE(arr)                                                           \
	reserve((void **)&(arr).a, &(arr).cap, (arr).n, sizeof(*(arr).a))

static int reserve(void **a, size_t *cap, size_t n, size_t sz)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 64;
	void *b = realloc(*a, ncap * sz);
	if (!b)
		return -ENOMEM;
	*a = b;
	*cap = ncap;
	return 0;
}

/* ---- interning ---------------------------------------------------------- */

/* Index of s in the string table, added if new; -ENOMEM on failure. */
static int64_t str_id(struct pp_profile *p, const char *s)
{
	size_t len = strlen(s);
	int64_t *idx = hmap_find(&p->str_idx, s, len);

	if (idx)
		return *idx;
	if (RESERVE(p->strs) < 0)
		return -ENOMEM;
	char *d = strdup(s);
	if (!d)
		return -ENOMEM;
	if (hmap_put(&p->str_idx, s, len, (int64_t)p->strs.n) < 0) {
		free(d);
		return -ENOMEM;
	}
	p->strs.a[p->strs.n] = d;
	return (int64_t)p->strs.n++;
}

static int src_index(struct pp_profile *p, const struct rd_stacks *s,
                     size_t *out)
{
	for (size_t i = 0; i < p->srcs.n; i++)
		if (p->srcs.a[i] == s) {
			*out = i;
			return 0;
		}
	if (RESERVE(p->srcs) < 0 || RESERVE(p->trees) < 0)
		return -ENOMEM;
	struct tree *g = malloc(sizeof(*g));
	if (!g)
		return -ENOMEM;
	if (tree_init(g, s) < 0) {
		tree_free(g);
		free(g);
		return -ENOMEM;
	}
	p->srcs.a[p->srcs.n] = s;
	p->trees.a[p->trees.n++] = g;
	*out = p->srcs.n++;
	return 0;
}

/* A mapping that stands for no module: heapprof's "[unknown]" (rel_pc is
 * the absolute pc) and "[heapprof]" (synthetic frames). */
static int is_pseudo_mapping(const struct rd_mapping *m)
{
	return m->end <= m->start || m->name[0] == '[';
}

/* pprof id of mapping m of source src; 0 if m is a pseudo mapping. */
static int map_id(struct pp_profile *p, size_t src, const struct rd_mapping *m,
                  uint64_t *out)
{
	int64_t key[2] = {(int64_t)src, m->id};
	int64_t *idx = hmap_find(&p->map_idx, key, sizeof(key));

	*out = 0;
	if (is_pseudo_mapping(m))
		return 0;
	if (idx) {
		*out = (uint64_t)*idx + 1;
		return 0;
	}
	int64_t file = str_id(p, m->name);
	int64_t bid = str_id(p, m->build_id ? m->build_id : "");
	if (file < 0 || bid < 0 || RESERVE(p->maps) < 0 ||
	    hmap_put(&p->map_idx, key, sizeof(key), (int64_t)p->maps.n) < 0)
		return -ENOMEM;
	struct pp_mapping *pm = &p->maps.a[p->maps.n];
	memset(pm, 0, sizeof(*pm));
	pm->start = (uint64_t)m->start;
	pm->limit = (uint64_t)m->end;
	pm->offset = (uint64_t)m->exact_offset;
	pm->filename = file;
	pm->build_id = bid;
	*out = ++p->maps.n;
	return 0;
}

static int fn_id(struct pp_profile *p, const char *name, const char *sysname,
                 const char *file, uint64_t *out)
{
	struct pp_function f = {
	        .name = str_id(p, name),
	        .system_name = str_id(p, sysname ? sysname : name),
	        .filename = str_id(p, file ? file : ""),
	};
	if (f.name < 0 || f.system_name < 0 || f.filename < 0)
		return -ENOMEM;
	int64_t *idx = hmap_find(&p->fn_idx, &f, sizeof(f));
	if (idx) {
		*out = (uint64_t)*idx + 1;
		return 0;
	}
	if (RESERVE(p->fns) < 0 ||
	    hmap_put(&p->fn_idx, &f, sizeof(f), (int64_t)p->fns.n) < 0)
		return -ENOMEM;
	p->fns.a[p->fns.n] = f;
	*out = ++p->fns.n;
	return 0;
}

static int add_line(struct pp_profile *p, const char *name, const char *sysname,
                    const char *file, int64_t line)
{
	uint64_t fid;
	int err = fn_id(p, name, sysname, file, &fid);

	if (err || (err = RESERVE(p->lines)) < 0)
		return err;
	p->lines.a[p->lines.n++] = (struct pp_line){fid, line > 0 ? line : 0};
	return 0;
}

/*
 * The lines of frame f: one per function of its chain in the heap model's
 * tree g (the functions inlined at its address, innermost first, or its
 * own name, or "module+0xrelpc" when it has none).  *named gets how many
 * lines carry a symbol's name; *offline is set when every line came from
 * offline symbols with a source file and line.
 */
static int frame_lines(struct pp_profile *p, struct tree *g,
                       const struct rd_frame *f, size_t *named, int *offline)
{
	size_t nsym = 0;
	const int32_t *funcs, *lines;
	int len = tree_frame_chain(g, f->id, &funcs, &lines);
	int err = len < 0 ? -ENOMEM : 0;

	rd_frame_symbols(g->s, f, &nsym);
	*offline = nsym > 0;
	*named = 0;
	for (int k = len; !err && k-- > 0;) {
		const struct tree_func *fn = &g->funcs[funcs[k]];
		const char *file = tree_func_file(g, funcs[k]);
		if (!fn->named || !file || lines[k] <= 0)
			*offline = 0;
		*named += fn->named != 0;
		/* Only the outermost function is the symbol-table entry
		 * whose mangled name the frame carries. */
		err = add_line(p, fn->name,
		               !fn->named                 ? ""
		               : k == 0 && f->system_name ? f->system_name
		                                          : NULL,
		               file, lines[k]);
	}
	return err;
}

/* pprof id of the location of frame frame_id of source src. */
static int loc_id(struct pp_profile *p, size_t src, int64_t frame_id,
                  uint64_t *out)
{
	const struct rd_stacks *s = p->srcs.a[src];
	int64_t idx = pairmap_get(&p->loc_idx, (int64_t)src, frame_id);
	size_t named = 0;

	if (idx) {
		*out = (uint64_t)idx;
		return 0;
	}
	const struct rd_frame *f = rd_frame_get(s, frame_id);
	const struct rd_mapping *m = f ? rd_mapping_get(s, f->mapping) : NULL;
	struct pp_location l = {.line_off = p->lines.n};
	int offline = 0, err = 0;

	if (m)
		err = map_id(p, src, m, &l.mapping);
	if (!err && f) {
		/* In a module: rel_pc + where ELF address 0 was.  In
		 * "[unknown]" (or a dangling mapping): rel_pc is the pc.
		 * Synthetic frames ("[heapprof]") have no address. */
		uint64_t pc = (uint64_t)f->rel_pc;
		if (l.mapping)
			pc += (uint64_t)(m->start - m->exact_offset -
			                 m->load_bias);
		else if (m && strcmp(m->name, "[unknown]") != 0)
			pc = 0;
		/* A return address: the call is in the byte before it. */
		if (pc)
			l.address = pc - 1;
		err = frame_lines(p, p->trees.a[src], f, &named, &offline);
	}
	bool added;
	struct pairmap_slot *sl = NULL;
	if (err || (err = RESERVE(p->locs)) < 0)
		return err;
	sl = pairmap_slot(&p->loc_idx, (int64_t)src, frame_id, &added);
	if (!sl)
		return -ENOMEM;
	sl->v = (int64_t)p->locs.n + 1;
	l.nlines = p->lines.n - l.line_off;
	if (l.mapping) {
		struct pp_mapping *pm = &p->maps.a[l.mapping - 1];
		pm->nlocs++;
		pm->named += named > 0;
		pm->offline += offline;
	}
	p->locs.a[p->locs.n] = l;
	*out = ++p->locs.n;
	return 0;
}

/* ---- public ------------------------------------------------------------- */

/* Go's heap profile names, in enum rd_view order. */
static const char *const go_heap_names[RD_NVIEWS] = {
        "inuse_space", "alloc_space", "inuse_objects", "alloc_objects"};

void pp_use_go_heap_names(struct pp_profile *p)
{
	p->view_names = go_heap_names;
}

struct pp_profile *pp_new(int64_t period)
{
	struct pp_profile *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->period = period > 0 ? period : 1;
	hmap_init(&p->str_idx);
	hmap_init(&p->map_idx);
	pairmap_init(&p->loc_idx);
	hmap_init(&p->fn_idx);
	pairmap_init(&p->stack_idx);
	/* The fixed strings: "" first, then the sample types. */
	static const char *const fixed[] = {"", "bytes", "count"};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (str_id(p, fixed[i]) < 0)
			goto fail;
	for (int v = 0; v < RD_NVIEWS; v++)
		if (str_id(p, rd_view_names[v]) < 0)
			goto fail;
	return p;
fail:
	pp_free(p);
	return NULL;
}

void pp_free(struct pp_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->strs.n; i++)
		free(p->strs.a[i]);
	free(p->strs.a);
	free(p->srcs.a);
	for (size_t i = 0; i < p->trees.n; i++) {
		tree_free(p->trees.a[i]);
		free(p->trees.a[i]);
	}
	free(p->trees.a);
	free(p->maps.a);
	free(p->locs.a);
	free(p->lines.a);
	free(p->fns.a);
	free(p->samples.a);
	free(p->stack_ids.a);
	free(p->labels.a);
	free(p->comments.a);
	hmap_free(&p->str_idx);
	hmap_free(&p->map_idx);
	pairmap_free(&p->loc_idx);
	hmap_free(&p->fn_idx);
	pairmap_free(&p->stack_idx);
	free(p);
}

void pp_set_time(struct pp_profile *p, int64_t time_nanos,
                 int64_t duration_nanos)
{
	p->time_nanos = time_nanos > 0 ? time_nanos : 0;
	p->duration_nanos = duration_nanos > 0 ? duration_nanos : 0;
}

int pp_add_comment(struct pp_profile *p, const char *text)
{
	int64_t id = str_id(p, text);

	if (id < 0 || RESERVE(p->comments) < 0)
		return -ENOMEM;
	p->comments.a[p->comments.n++] = id;
	return 0;
}

size_t pp_nsamples(const struct pp_profile *p)
{
	return p->samples.n;
}

/* The location ids of the stack ending at callsite of source src: *off
 * and *n in stack_ids, appended the first time the stack is seen. */
static int stack_locs(struct pp_profile *p, size_t src, int64_t callsite,
                      size_t *off, size_t *n)
{
	const struct rd_stacks *s = p->srcs.a[src];
	int64_t idx = pairmap_get(&p->stack_idx, (int64_t)src, callsite);
	int err;

	if (idx) {
		*off = (size_t)((uint64_t)(idx - 1) >> 16);
		*n = (size_t)((idx - 1) & 0xffff);
		return 0;
	}
	*off = p->stack_ids.n;
	const struct rd_callsite *c = rd_callsite_get(s, callsite);
	for (int depth = 0; c && depth < RD_MAX_DEPTH; depth++) {
		uint64_t id = 0;
		if ((err = loc_id(p, src, c->frame, &id)) < 0 ||
		    (err = RESERVE(p->stack_ids)) < 0) {
			p->stack_ids.n = *off;
			return err;
		}
		p->stack_ids.a[p->stack_ids.n++] = id;
		c = c->parent ? rd_callsite_get(s, c->parent) : NULL;
	}
	*n = p->stack_ids.n - *off;
	/* RD_MAX_DEPTH < 2^16: the count fits beside the offset. */
	bool added;
	struct pairmap_slot *sl =
	        pairmap_slot(&p->stack_idx, (int64_t)src, callsite, &added);
	if (!sl) {
		p->stack_ids.n = *off;
		return -ENOMEM;
	}
	sl->v = (int64_t)(((uint64_t)*off << 16) | *n) + 1;
	return 0;
}

int pp_add_sample_labels(struct pp_profile *p, const struct rd_stacks *s,
                         int64_t callsite, const int64_t v[RD_NVIEWS],
                         const struct pp_label *labels, size_t nlabels)
{
	struct pp_sample x = {.label_off = p->labels.n};
	int any = 0, err;
	size_t src;

	for (int i = 0; i < RD_NVIEWS; i++)
		any |= (x.v[i] = v[i]) != 0;
	if (!any)
		return 0;
	if ((err = src_index(p, s, &src)) < 0)
		return err;
	for (size_t i = 0; i < nlabels; i++) {
		const struct pp_label *in = &labels[i];
		struct pp_lab l = {.num = in->num};
		l.key = str_id(p, in->key);
		if (l.key < 0)
			goto nomem;
		/* A string label has no number, a numeric one no string. */
		if (in->str) {
			l.num = 0;
			if ((l.str = str_id(p, in->str)) < 0)
				goto nomem;
		} else if (in->num_unit &&
		           (l.unit = str_id(p, in->num_unit)) < 0) {
			goto nomem;
		}
		if (RESERVE(p->labels) < 0)
			goto nomem;
		p->labels.a[p->labels.n++] = l;
	}
	x.nlabels = p->labels.n - x.label_off;
	if ((err = stack_locs(p, src, callsite, &x.loc_off, &x.nlocs)) < 0 ||
	    (err = RESERVE(p->samples)) < 0) {
		p->labels.n = x.label_off;
		return err;
	}
	p->samples.a[p->samples.n++] = x;
	return 0;
nomem:
	p->labels.n = x.label_off;
	return -ENOMEM;
}

int pp_add_sample(struct pp_profile *p, const struct rd_stacks *s,
                  int64_t callsite, const int64_t v[RD_NVIEWS],
                  const char *label_key, const char *label_value)
{
	struct pp_label l = {
	        .key = label_key,
	        .str = label_value ? label_value : "",
	};
	return pp_add_sample_labels(p, s, callsite, v, &l, label_key ? 1 : 0);
}

/* ---- encoding ----------------------------------------------------------- */

typedef Perftools__Profiles__Profile PbProfile;
typedef Perftools__Profiles__ValueType PbValueType;
typedef Perftools__Profiles__Sample PbSample;
typedef Perftools__Profiles__Label PbLabel;
typedef Perftools__Profiles__Mapping PbMapping;
typedef Perftools__Profiles__Location PbLocation;
typedef Perftools__Profiles__Line PbLine;
typedef Perftools__Profiles__Function PbFunction;

/* Everything pp_encode allocates for the messages, freed together. */
struct pb_mem {
	PbValueType types[RD_NVIEWS], period_type;
	PbValueType *type_ptrs[RD_NVIEWS];
	PbSample *samples, **sample_ptrs;
	PbLabel *labels, **label_ptrs;
	PbMapping *maps, **map_ptrs;
	PbLocation *locs, **loc_ptrs;
	PbLine *lines, **line_ptrs;
	PbFunction *fns, **fn_ptrs;
};

static void pb_mem_free(struct pb_mem *m)
{
	free(m->samples);
	free(m->sample_ptrs);
	free(m->labels);
	free(m->label_ptrs);
	free(m->maps);
	free(m->map_ptrs);
	free(m->locs);
	free(m->loc_ptrs);
	free(m->lines);
	free(m->line_ptrs);
	free(m->fns);
	free(m->fn_ptrs);
}

/* calloc of n elements, never NULL for n == 0 unless out of memory. */
static void *alloc_n(size_t n, size_t sz)
{
	return calloc(n ? n : 1, sz);
}

static int pb_alloc(struct pb_mem *m, const struct pp_profile *p)
{
	size_t nlabels = p->labels.n;

	m->samples = alloc_n(p->samples.n, sizeof(*m->samples));
	m->sample_ptrs = alloc_n(p->samples.n, sizeof(*m->sample_ptrs));
	m->labels = alloc_n(nlabels, sizeof(*m->labels));
	m->label_ptrs = alloc_n(nlabels, sizeof(*m->label_ptrs));
	m->maps = alloc_n(p->maps.n, sizeof(*m->maps));
	m->map_ptrs = alloc_n(p->maps.n, sizeof(*m->map_ptrs));
	m->locs = alloc_n(p->locs.n, sizeof(*m->locs));
	m->loc_ptrs = alloc_n(p->locs.n, sizeof(*m->loc_ptrs));
	m->lines = alloc_n(p->lines.n, sizeof(*m->lines));
	m->line_ptrs = alloc_n(p->lines.n, sizeof(*m->line_ptrs));
	m->fns = alloc_n(p->fns.n, sizeof(*m->fns));
	m->fn_ptrs = alloc_n(p->fns.n, sizeof(*m->fn_ptrs));
	if (!m->samples || !m->sample_ptrs || !m->labels || !m->label_ptrs ||
	    !m->maps || !m->map_ptrs || !m->locs || !m->loc_ptrs || !m->lines ||
	    !m->line_ptrs || !m->fns || !m->fn_ptrs)
		return -ENOMEM;
	return 0;
}

static void pb_fill_samples(struct pb_mem *m, struct pp_profile *p,
                            PbProfile *pb)
{
	size_t nl = 0;

	for (size_t i = 0; i < p->samples.n; i++) {
		struct pp_sample *x = &p->samples.a[i];
		PbSample *s = &m->samples[i];
		perftools__profiles__sample__init(s);
		s->n_location_id = x->nlocs;
		/* A sample without a location (a stack with no frame in a
		 * bad file) may come with no stack ids at all: NULL + 0 is
		 * undefined. */
		s->location_id = x->nlocs ? p->stack_ids.a + x->loc_off : NULL;
		s->n_value = RD_NVIEWS;
		s->value = x->v;
		if (x->nlabels) {
			s->n_label = x->nlabels;
			s->label = &m->label_ptrs[nl];
		}
		for (size_t k = 0; k < x->nlabels; k++) {
			const struct pp_lab *in =
			        &p->labels.a[x->label_off + k];
			PbLabel *l = &m->labels[nl];
			perftools__profiles__label__init(l);
			l->key = in->key;
			l->str = in->str;
			l->num = in->num;
			l->num_unit = in->unit;
			m->label_ptrs[nl++] = l;
		}
		m->sample_ptrs[i] = s;
	}
	pb->n_sample = p->samples.n;
	pb->sample = m->sample_ptrs;
}

static void pb_fill_tables(struct pb_mem *m, struct pp_profile *p,
                           PbProfile *pb)
{
	for (size_t i = 0; i < p->maps.n; i++) {
		const struct pp_mapping *x = &p->maps.a[i];
		PbMapping *o = &m->maps[i];
		perftools__profiles__mapping__init(o);
		o->id = i + 1;
		o->memory_start = x->start;
		o->memory_limit = x->limit;
		o->file_offset = x->offset;
		o->filename = x->filename;
		o->build_id = x->build_id;
		o->has_functions = x->named == x->nlocs;
		o->has_filenames = o->has_line_numbers = o->has_inline_frames =
		        x->offline == x->nlocs;
		m->map_ptrs[i] = o;
	}
	for (size_t i = 0; i < p->lines.n; i++) {
		PbLine *o = &m->lines[i];
		perftools__profiles__line__init(o);
		o->function_id = p->lines.a[i].function;
		o->line = p->lines.a[i].line;
		m->line_ptrs[i] = o;
	}
	for (size_t i = 0; i < p->locs.n; i++) {
		const struct pp_location *x = &p->locs.a[i];
		PbLocation *o = &m->locs[i];
		perftools__profiles__location__init(o);
		o->id = i + 1;
		o->mapping_id = x->mapping;
		o->address = x->address;
		o->n_line = x->nlines;
		o->line = x->nlines ? &m->line_ptrs[x->line_off] : NULL;
		m->loc_ptrs[i] = o;
	}
	for (size_t i = 0; i < p->fns.n; i++) {
		PbFunction *o = &m->fns[i];
		perftools__profiles__function__init(o);
		o->id = i + 1;
		o->name = p->fns.a[i].name;
		o->system_name = p->fns.a[i].system_name;
		o->filename = p->fns.a[i].filename;
		m->fn_ptrs[i] = o;
	}
	/* pprof takes the first mapping for the main binary ("File:"): put
	 * the lowest-loaded file first (the executable, PIE or not, is below
	 * the shared libraries and the dynamic loader).  Ids stay. */
	int main_is_file = 0;
	size_t main = 0;
	for (size_t i = 0; i < p->maps.n; i++) {
		int64_t fi = p->maps.a[i].filename;
		const char *f =
		        fi > 0 && (size_t)fi < p->strs.n ? p->strs.a[fi] : "";
		int is_file = f[0] == '/';
		if (is_file && (i == main || !main_is_file ||
		                p->maps.a[i].start < p->maps.a[main].start)) {
			main = i;
			main_is_file = 1;
		}
	}
	if (main) {
		PbMapping *t = m->map_ptrs[0];
		m->map_ptrs[0] = m->map_ptrs[main];
		m->map_ptrs[main] = t;
	}
	pb->n_mapping = p->maps.n;
	pb->mapping = m->map_ptrs;
	pb->n_location = p->locs.n;
	pb->location = m->loc_ptrs;
	pb->n_function = p->fns.n;
	pb->function = m->fn_ptrs;
}

int pp_encode(struct pp_profile *p, uint8_t **out, size_t *len)
{
	struct pb_mem m;
	PbProfile pb;
	int64_t bytes = str_id(p, "bytes"), count = str_id(p, "count");
	const char *const *names =
	        p->view_names ? p->view_names : rd_view_names;
	int64_t space = str_id(p, names[RD_SPACE]);
	int err = 0;

	*out = NULL;
	*len = 0;
	if (bytes < 0 || count < 0 || space < 0)
		return -ENOMEM;
	memset(&m, 0, sizeof(m));
	perftools__profiles__profile__init(&pb);
	for (int v = 0; v < RD_NVIEWS; v++) {
		perftools__profiles__value_type__init(&m.types[v]);
		m.types[v].type = str_id(p, names[v]);
		m.types[v].unit =
		        v == RD_SPACE || v == RD_ALLOC_SPACE ? bytes : count;
		m.type_ptrs[v] = &m.types[v];
	}
	perftools__profiles__value_type__init(&m.period_type);
	m.period_type.type = space;
	m.period_type.unit = bytes;
	if ((err = pb_alloc(&m, p)) < 0)
		goto out;
	pb.n_sample_type = RD_NVIEWS;
	pb.sample_type = m.type_ptrs;
	pb_fill_samples(&m, p, &pb);
	pb_fill_tables(&m, p, &pb);
	pb.n_string_table = p->strs.n;
	pb.string_table = p->strs.a;
	pb.time_nanos = p->time_nanos;
	pb.duration_nanos = p->duration_nanos;
	pb.period_type = &m.period_type;
	pb.period = p->period;
	pb.n_comment = p->comments.n;
	pb.comment = p->comments.a;
	pb.default_sample_type = space;
	size_t n = perftools__profiles__profile__get_packed_size(&pb);
	*out = malloc(n ? n : 1);
	if (!*out) {
		err = -ENOMEM;
		goto out;
	}
	*len = perftools__profiles__profile__pack(&pb, *out);
out:
	pb_mem_free(&m);
	return err;
}

/* Compress buf into a gzip stream in *out. */
static int gzip_buf(const uint8_t *buf, size_t len, uint8_t **out, size_t *olen)
{
	z_stream z;

	memset(&z, 0, sizeof(z));
	/* 15 + 16: a 32 KiB window with a gzip header and trailer.  Fastest
	 * compression, as Go's runtime/pprof writes its profiles: a million
	 * stacks take a third of the time of the default level for a file
	 * about 1.5 times as big. */
	if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8,
	                 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	size_t cap = deflateBound(&z, (uLong)len) + 64;
	uint8_t *o = malloc(cap);
	if (!o) {
		deflateEnd(&z);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)buf;
	z.avail_in = (uInt)len;
	z.next_out = o;
	z.avail_out = (uInt)cap;
	int rc = deflate(&z, Z_FINISH);
	*olen = cap - z.avail_out;
	deflateEnd(&z);
	if (rc != Z_STREAM_END) {
		free(o);
		return -EIO;
	}
	*out = o;
	return 0;
}

static int write_all(int fd, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t w = write(fd, buf, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

int pp_encode_gz(struct pp_profile *p, uint8_t **out, size_t *len)
{
	uint8_t *raw = NULL;
	size_t nraw = 0;
	int err = pp_encode(p, &raw, &nraw);

	*out = NULL;
	*len = 0;
	if (!err && nraw > UINT32_MAX)
		err = -EFBIG; /* zlib's one-shot lengths are 32-bit */
	if (!err)
		err = gzip_buf(raw, nraw, out, len);
	free(raw);
	return err;
}

int pp_write_gz(struct pp_profile *p, const char *path, const char *subsys)
{
	uint8_t *gz = NULL;
	size_t ngz = 0;
	int err = pp_encode_gz(p, &gz, &ngz);

	if (err) {
		hp_err(subsys, "%s: encoding the profile: %s", path,
		       strerror(-err));
		return err;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		err = -errno;
		hp_err(subsys, "%s: %s", path, strerror(errno));
		free(gz);
		return err;
	}
	/* A partial file is removed, but only a regular one: as root, an
	 * unlink after a failed write to -o /dev/full took the device. */
	struct stat sb;
	bool regular = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
	err = write_all(fd, gz, ngz);
	if (close(fd) != 0 && !err)
		err = -errno;
	free(gz);
	if (err) {
		hp_err(subsys, "%s: writing: %s", path, strerror(-err));
		if (regular)
			unlink(path);
	}
	return err;
}

/* ---- symbols ------------------------------------------------------------ */

/* The name of location i's innermost function (an unnamed frame's
 * "module+0xrelpc" too, as every view names it); NULL: none, or one that
 * cannot be a line of the symbol protocol. */
static const char *loc_name(const struct pp_profile *p, size_t i)
{
	const struct pp_location *l = &p->locs.a[i];
	if (!l->address || !l->nlines)
		return NULL;
	uint64_t fid = p->lines.a[l->line_off].function;
	if (!fid || fid > p->fns.n)
		return NULL;
	int64_t k = p->fns.a[fid - 1].name;
	if (k <= 0 || (size_t)k >= p->strs.n)
		return NULL;
	const char *name = p->strs.a[k];
	for (const char *c = name; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return NULL;
	return name;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct pp_sym *x = a, *y = b;
	if (x->address != y->address)
		return x->address < y->address ? -1 : 1;
	/* the first location of an address wins: names in location order */
	return x->name < y->name ? -1 : x->name > y->name;
}

int pp_symtab_make(const struct pp_profile *p, struct pp_symtab *t)
{
	size_t n = 0, bytes = 0;

	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < p->locs.n; i++) {
		const char *name = loc_name(p, i);
		if (name) {
			n++;
			bytes += strlen(name) + 1;
		}
	}
	t->syms = alloc_n(n, sizeof(*t->syms));
	t->names = malloc(bytes ? bytes : 1);
	if (!t->syms || !t->names) {
		pp_symtab_free(t);
		return -ENOMEM;
	}
	/* Names copied in location order, so that their addresses order
	 * the entries of one address as sym_cmp wants. */
	char *w = t->names;
	for (size_t i = 0; i < p->locs.n; i++) {
		const char *name = loc_name(p, i);
		if (!name)
			continue;
		size_t len = strlen(name) + 1;
		memcpy(w, name, len);
		t->syms[t->n++] = (struct pp_sym){p->locs.a[i].address, w};
		w += len;
	}
	qsort(t->syms, t->n, sizeof(*t->syms), sym_cmp);
	size_t k = 0;
	for (size_t i = 0; i < t->n; i++)
		if (!k || t->syms[k - 1].address != t->syms[i].address)
			t->syms[k++] = t->syms[i];
	t->n = k;
	return 0;
}

const struct pp_sym *pp_symtab_find(const struct pp_symtab *t, uint64_t address)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->syms[mid].address < address)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->n && t->syms[lo].address == address ? &t->syms[lo]
	                                                   : NULL;
}

void pp_symtab_free(struct pp_symtab *t)
{
	free(t->syms);
	free(t->names);
	memset(t, 0, sizeof(*t));
}

/* ---- from a profile file ------------------------------------------------ */

int pp_add_dump(struct pp_profile *p, sqlite3 *db, const struct rd_stacks *s,
                int64_t upid, const char *heap, int64_t ts, int negate,
                size_t *nadded, const char *subsys)
{
	struct rd_sample *x = NULL;
	size_t n = 0, before = p->samples.n;
	int err = state_at_dump(db, subsys, upid, heap, ts, &x, &n);

	for (size_t i = 0; !err && i < n; i++) {
		int64_t v[RD_NVIEWS];
		for (int k = 0; k < RD_NVIEWS; k++)
			v[k] = negate ? -x[i].v[k] : x[i].v[k];
		err = pp_add_sample(p, s, x[i].callsite, v,
		                    negate ? PP_DIFF_BASE_KEY : NULL,
		                    PP_DIFF_BASE_VALUE);
		if (err)
			hp_err(subsys, "out of memory");
	}
	free(x);
	if (nadded)
		*nadded = p->samples.n - before;
	return err;
}
