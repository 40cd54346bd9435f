/*
 * Unit tests of the pprof encoder (src/export/pprof.c): stack tables made
 * by hand, encoded, decoded again with protobuf-c and checked field by
 * field: string table, sample types and their order, period, mappings,
 * location addresses (return address - 1, absolute), lines of offline
 * symbols innermost first, unnamed and pseudo-mapping frames, labels
 * (string and numeric with a unit, checked in the encoded bytes too),
 * dropped all-zero samples, sharing across two stack tables, the gzip
 * file, and the symbol table of /debug/pprof/symbol.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "export/pprof.h"
#include "export/profile.pb-c.h"
#include "unit.h"

typedef Perftools__Profiles__Profile PbProfile;

/*
 * A module "/bin/prog" whose executable segment (file offset 0x1000,
 * p_vaddr - p_offset = 0x200) was mapped at 0x555500001000: ELF address 0
 * at 0x555500001000 - 0x1000 - 0x200.
 */
#define START  0x555500001000LL
#define END    0x555500003000LL
#define OFFSET 0x1000LL
#define BIAS   0x200LL
#define BASE   (START - OFFSET - BIAS)

static struct rd_mapping maps[] = {
        {.id = 1,
         .name = "/bin/prog",
         .build_id = "00ff10ab",
         .start = START,
         .end = END,
         .exact_offset = OFFSET,
         .load_bias = BIAS},
        {.id = 2, .name = "[unknown]"},
        {.id = 3, .name = "[heapprof]"},
};

/*
 * Frames: 1 main, 2 leaf (symbolized offline: inlined "inner" at f.c:12
 * in "outer" at f.c:30), 3 unnamed, 4 in [unknown] (absolute pc),
 * 5 synthetic, 6 C++ (mangled name).
 */
static struct rd_frame frames[] = {
        {.id = 1, .mapping = 1, .rel_pc = 0x1500, .name = "main"},
        {.id = 2,
         .mapping = 1,
         .rel_pc = 0x1234,
         .name = "outer",
         .system_name = "outer",
         .symbol_set_id = 7},
        {.id = 3, .mapping = 1, .rel_pc = 0x1800},
        {.id = 4, .mapping = 2, .rel_pc = 0x7f0000001000LL},
        {.id = 5, .mapping = 3, .rel_pc = 1, .name = "[stack table full]"},
        {.id = 6,
         .mapping = 1,
         .rel_pc = 0x1900,
         .name = "ns::f(int)",
         .system_name = "_ZN2ns1fEi"},
};

static struct rd_symbol symbols[] = {
        {.id = 1,
         .symbol_set_id = 7,
         .name = "inner",
         .source_file = "f.c",
         .line = 12},
        {.id = 2,
         .symbol_set_id = 7,
         .name = "outer",
         .source_file = "f.c",
         .line = 30},
};

/* 1 main; 2 main>leaf; 3 main>unnamed; 4 unknown; 5 synthetic;
 * 6 main>C++. */
static struct rd_callsite callsites[] = {
        {.id = 1, .parent = 0, .frame = 1, .depth = 0},
        {.id = 2, .parent = 1, .frame = 2, .depth = 1},
        {.id = 3, .parent = 1, .frame = 3, .depth = 1},
        {.id = 4, .parent = 0, .frame = 4, .depth = 0},
        {.id = 5, .parent = 0, .frame = 5, .depth = 0},
        {.id = 6, .parent = 1, .frame = 6, .depth = 1},
};

static struct rd_stacks stacks = {
        .mappings = maps,
        .nmappings = 3,
        .frames = frames,
        .nframes = 6,
        .callsites = callsites,
        .ncallsites = 6,
        .symbols = symbols,
        .nsymbols = 2,
};

static const char *str(const PbProfile *pb, int64_t i)
{
	return i >= 0 && (size_t)i < pb->n_string_table ? pb->string_table[i]
	                                                : "<bad index>";
}

static PbProfile *roundtrip(struct pp_profile *p)
{
	uint8_t *buf = NULL;
	size_t len = 0;

	CHECK(pp_encode(p, &buf, &len) == 0);
	PbProfile *pb = perftools__profiles__profile__unpack(NULL, len, buf);
	free(buf);
	CHECK(pb != NULL);
	return pb;
}

static const Perftools__Profiles__Location *loc(const PbProfile *pb,
                                                uint64_t id)
{
	for (size_t i = 0; i < pb->n_location; i++)
		if (pb->location[i]->id == id)
			return pb->location[i];
	return NULL;
}

static const Perftools__Profiles__Function *fn(const PbProfile *pb, uint64_t id)
{
	for (size_t i = 0; i < pb->n_function; i++)
		if (pb->function[i]->id == id)
			return pb->function[i];
	return NULL;
}

static void test_header(void)
{
	struct pp_profile *p = pp_new(4096);
	pp_set_time(p, 1700000000000000000LL, 5000);
	CHECK(pp_add_comment(p, "hello") == 0);
	PbProfile *pb = roundtrip(p);
	if (pb) {
		CHECK(pb->n_string_table > 0 &&
		      !strcmp(pb->string_table[0], ""));
		CHECK_EQ_U64(pb->n_sample_type, 4);
		const char *types[] = {"space", "alloc_space", "objects",
		                       "alloc_objects"};
		const char *units[] = {"bytes", "bytes", "count", "count"};
		for (size_t i = 0; i < 4 && i < pb->n_sample_type; i++) {
			CHECK(!strcmp(str(pb, pb->sample_type[i]->type),
			              types[i]));
			CHECK(!strcmp(str(pb, pb->sample_type[i]->unit),
			              units[i]));
		}
		CHECK(!strcmp(str(pb, pb->default_sample_type), "space"));
		CHECK(pb->period_type != NULL);
		if (pb->period_type) {
			CHECK(!strcmp(str(pb, pb->period_type->type), "space"));
			CHECK(!strcmp(str(pb, pb->period_type->unit), "bytes"));
		}
		CHECK_EQ_U64(pb->period, 4096);
		CHECK_EQ_U64(pb->time_nanos, 1700000000000000000ULL);
		CHECK_EQ_U64(pb->duration_nanos, 5000);
		CHECK_EQ_U64(pb->n_comment, 1);
		CHECK(pb->n_comment == 1 &&
		      !strcmp(str(pb, pb->comment[0]), "hello"));
		CHECK_EQ_U64(pb->n_sample, 0);
		perftools__profiles__profile__free_unpacked(pb, NULL);
	}
	pp_free(p);
}

static void test_samples(void)
{
	struct pp_profile *p = pp_new(1);
	int64_t v1[RD_NVIEWS] = {100, 200, 1, 2};
	int64_t zero[RD_NVIEWS] = {0, 0, 0, 0};
	int64_t v3[RD_NVIEWS] = {0, 50, 0, 5};

	CHECK(pp_add_sample(p, &stacks, 2, v1, NULL, NULL) == 0);
	CHECK(pp_add_sample(p, &stacks, 3, zero, NULL, NULL) == 0);
	CHECK(pp_add_sample(p, &stacks, 3, v3, NULL, NULL) == 0);
	CHECK(pp_add_sample(p, &stacks, 4, v1, "k", "v") == 0);
	CHECK(pp_add_sample(p, &stacks, 5, v1, NULL, NULL) == 0);
	CHECK(pp_add_sample(p, &stacks, 6, v1, NULL, NULL) == 0);
	CHECK_EQ_U64(pp_nsamples(p), 5); /* the all-zero one dropped */
	PbProfile *pb = roundtrip(p);
	if (!pb) {
		pp_free(p);
		return;
	}
	CHECK_EQ_U64(pb->n_sample, 5);
	CHECK_EQ_U64(pb->n_mapping, 1);
	if (pb->n_mapping == 1) {
		const Perftools__Profiles__Mapping *m = pb->mapping[0];
		CHECK_EQ_U64(m->id, 1);
		CHECK_EQ_U64(m->memory_start, START);
		CHECK_EQ_U64(m->memory_limit, END);
		CHECK_EQ_U64(m->file_offset, OFFSET);
		CHECK(!strcmp(str(pb, m->filename), "/bin/prog"));
		CHECK(!strcmp(str(pb, m->build_id), "00ff10ab"));
		CHECK(!m->has_functions); /* frame 3 has no name */
		CHECK(!m->has_line_numbers);
	}
	if (pb->n_sample == 5) {
		/* Sample 0: leaf (offline symbols) then main. */
		const Perftools__Profiles__Sample *s = pb->sample[0];
		CHECK_EQ_U64(s->n_value, 4);
		CHECK(s->n_value == 4 && s->value[0] == 100 &&
		      s->value[1] == 200 && s->value[2] == 1 &&
		      s->value[3] == 2);
		CHECK_EQ_U64(s->n_location_id, 2);
		CHECK_EQ_U64(s->n_label, 0);
		const Perftools__Profiles__Location *l =
		        s->n_location_id == 2 ? loc(pb, s->location_id[0])
		                              : NULL;
		CHECK(l != NULL);
		if (l) {
			CHECK_EQ_U64(l->mapping_id, 1);
			CHECK_EQ_U64(l->address, BASE + 0x1234 - 1);
			CHECK_EQ_U64(l->n_line, 2);
			if (l->n_line == 2) {
				const Perftools__Profiles__Function *f0 =
				        fn(pb, l->line[0]->function_id);
				const Perftools__Profiles__Function *f1 =
				        fn(pb, l->line[1]->function_id);
				CHECK(f0 &&
				      !strcmp(str(pb, f0->name), "inner"));
				CHECK(f0 &&
				      !strcmp(str(pb, f0->filename), "f.c"));
				CHECK_EQ_U64(l->line[0]->line, 12);
				CHECK(f1 &&
				      !strcmp(str(pb, f1->name), "outer"));
				CHECK_EQ_U64(l->line[1]->line, 30);
			}
		}
		l = s->n_location_id == 2 ? loc(pb, s->location_id[1]) : NULL;
		CHECK(l && l->address == BASE + 0x1500 - 1 && l->n_line == 1);
		if (l && l->n_line == 1) {
			const Perftools__Profiles__Function *f =
			        fn(pb, l->line[0]->function_id);
			CHECK(f && !strcmp(str(pb, f->name), "main"));
			CHECK(f && !strcmp(str(pb, f->system_name), "main"));
			CHECK_EQ_U64(l->line[0]->line, 0);
		}
		/* Sample 1: the unnamed frame is named as the heap model
		 * names it, module+0xrelpc, with no system name; main
		 * shared. */
		s = pb->sample[1];
		CHECK(s->n_location_id == 2 && s->value[1] == 50 &&
		      s->value[3] == 5);
		l = s->n_location_id == 2 ? loc(pb, s->location_id[0]) : NULL;
		CHECK(l && l->n_line == 1 && l->address == BASE + 0x1800 - 1);
		if (l && l->n_line == 1) {
			const Perftools__Profiles__Function *f =
			        fn(pb, l->line[0]->function_id);
			CHECK(f && !strcmp(str(pb, f->name), "prog+0x1800"));
			CHECK(f && !strcmp(str(pb, f->system_name), ""));
		}
		CHECK(s->n_location_id == 2 &&
		      s->location_id[1] == pb->sample[0]->location_id[1]);
		/* Sample 2: [unknown], no mapping, absolute pc - 1; label. */
		s = pb->sample[2];
		l = s->n_location_id == 1 ? loc(pb, s->location_id[0]) : NULL;
		CHECK(l && l->mapping_id == 0 &&
		      l->address == 0x7f0000001000ULL - 1 && l->n_line == 1);
		CHECK_EQ_U64(s->n_label, 1);
		if (s->n_label == 1) {
			CHECK(!strcmp(str(pb, s->label[0]->key), "k"));
			CHECK(!strcmp(str(pb, s->label[0]->str), "v"));
		}
		/* Sample 3: synthetic frame: a name, no mapping, no address. */
		s = pb->sample[3];
		l = s->n_location_id == 1 ? loc(pb, s->location_id[0]) : NULL;
		CHECK(l && l->mapping_id == 0 && l->address == 0 &&
		      l->n_line == 1);
		/* Sample 4: C++ name and mangled name. */
		s = pb->sample[4];
		l = s->n_location_id == 2 ? loc(pb, s->location_id[0]) : NULL;
		const Perftools__Profiles__Function *f =
		        l && l->n_line == 1 ? fn(pb, l->line[0]->function_id)
		                            : NULL;
		CHECK(f && !strcmp(str(pb, f->name), "ns::f(int)"));
		CHECK(f && !strcmp(str(pb, f->system_name), "_ZN2ns1fEi"));
	}
	/* Functions are shared: main once, whatever the stacks. */
	size_t nmain = 0;
	for (size_t i = 0; i < pb->n_function; i++)
		nmain += !strcmp(str(pb, pb->function[i]->name), "main");
	CHECK_EQ_U64(nmain, 1);
	for (size_t i = 0; i < pb->n_location; i++)
		CHECK_EQ_U64(pb->location[i]->id, i + 1);
	perftools__profiles__profile__free_unpacked(pb, NULL);
	pp_free(p);
}

/* Two stack tables (two files): locations per table, functions shared. */
static void test_two_sources(void)
{
	struct rd_stacks other = stacks;
	struct pp_profile *p = pp_new(1);
	int64_t v[RD_NVIEWS] = {1, 1, 1, 1}, neg[RD_NVIEWS] = {-1, -1, -1, -1};

	CHECK(pp_add_sample(p, &stacks, 1, v, NULL, NULL) == 0);
	CHECK(pp_add_sample(p, &other, 1, neg, PP_DIFF_BASE_KEY,
	                    PP_DIFF_BASE_VALUE) == 0);
	PbProfile *pb = roundtrip(p);
	if (pb) {
		CHECK_EQ_U64(pb->n_mapping, 2);
		CHECK_EQ_U64(pb->n_location, 2);
		CHECK_EQ_U64(pb->n_function, 1);
		CHECK(pb->n_sample == 2 && pb->sample[1]->n_label == 1 &&
		      pb->sample[1]->value[0] == -1);
		if (pb->n_sample == 2 && pb->sample[1]->n_label == 1) {
			CHECK(!strcmp(str(pb, pb->sample[1]->label[0]->key),
			              "pprof::base"));
			CHECK(!strcmp(str(pb, pb->sample[1]->label[0]->str),
			              "true"));
		}
		perftools__profiles__profile__free_unpacked(pb, NULL);
	}
	pp_free(p);
}

/* The bytes of a varint-keyed field: key = field << 3 | wire type 0. */
static size_t put_varint(uint8_t *b, uint64_t v)
{
	size_t n = 0;
	do {
		b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	return n;
}

/* Whether needle occurs in hay. */
static int contains(const uint8_t *hay, size_t n, const uint8_t *needle,
                    size_t m)
{
	for (size_t i = 0; m <= n && i <= n - m; i++)
		if (!memcmp(hay + i, needle, m))
			return 1;
	return 0;
}

static int64_t str_index(const PbProfile *pb, const char *s)
{
	for (size_t i = 0; i < pb->n_string_table; i++)
		if (!strcmp(pb->string_table[i], s))
			return (int64_t)i;
	return -1;
}

/* Per-block samples: labels of both kinds, several per sample, in order;
 * samples of one callsite share their location list. */
static void test_labels(void)
{
	struct pp_profile *p = pp_new(1);
	int64_t v1[RD_NVIEWS] = {48, 48, 1, 1}, v2[RD_NVIEWS] = {16, 16, 1, 1};
	const struct pp_label l1[] = {
	        {.key = "address", .str = "0x7f0000001230"},
	        {.key = "timestamp",
	         .num = 123456789012LL,
	         .num_unit = "nanoseconds"},
	        {.key = "thread", .num = 4242},
	};
	const struct pp_label l2[] = {
	        {.key = "address", .str = "0x7f0000004560"},
	        {.key = "thread", .num = 4243},
	};

	CHECK(pp_add_sample_labels(p, &stacks, 2, v1, l1, 3) == 0);
	CHECK(pp_add_sample_labels(p, &stacks, 2, v2, l2, 2) == 0);
	/* An all-zero sample is dropped, labels and all. */
	int64_t zero[RD_NVIEWS] = {0};
	CHECK(pp_add_sample_labels(p, &stacks, 2, zero, l2, 2) == 0);
	CHECK_EQ_U64(pp_nsamples(p), 2);

	uint8_t *buf = NULL;
	size_t len = 0;
	CHECK(pp_encode(p, &buf, &len) == 0);
	PbProfile *pb =
	        buf ? perftools__profiles__profile__unpack(NULL, len, buf)
	            : NULL;
	CHECK(pb != NULL);
	if (!pb) {
		free(buf);
		pp_free(p);
		return;
	}
	CHECK_EQ_U64(pb->n_sample, 2);
	if (pb->n_sample == 2) {
		const Perftools__Profiles__Sample *s = pb->sample[0];
		CHECK_EQ_U64(s->n_label, 3);
		if (s->n_label == 3) {
			CHECK(!strcmp(str(pb, s->label[0]->key), "address"));
			CHECK(!strcmp(str(pb, s->label[0]->str),
			              "0x7f0000001230"));
			CHECK_EQ_U64(s->label[0]->num, 0);
			CHECK_EQ_U64(s->label[0]->num_unit, 0);
			CHECK(!strcmp(str(pb, s->label[1]->key), "timestamp"));
			CHECK_EQ_U64(s->label[1]->str, 0);
			CHECK_EQ_U64(s->label[1]->num, 123456789012ULL);
			CHECK(!strcmp(str(pb, s->label[1]->num_unit),
			              "nanoseconds"));
			CHECK(!strcmp(str(pb, s->label[2]->key), "thread"));
			CHECK_EQ_U64(s->label[2]->num, 4242);
			CHECK_EQ_U64(s->label[2]->num_unit, 0);
		}
		const Perftools__Profiles__Sample *t = pb->sample[1];
		CHECK_EQ_U64(t->n_label, 2);
		if (t->n_label == 2) {
			CHECK(!strcmp(str(pb, t->label[0]->str),
			              "0x7f0000004560"));
			CHECK_EQ_U64(t->label[1]->num, 4243);
		}
		CHECK(t->value[0] == 16 && t->value[2] == 1);
		/* One stack, both samples: main > leaf. */
		CHECK(s->n_location_id == 2 && t->n_location_id == 2);
		CHECK(s->n_location_id == 2 && t->n_location_id == 2 &&
		      s->location_id[0] == t->location_id[0] &&
		      s->location_id[1] == t->location_id[1]);
		CHECK_EQ_U64(pb->n_location, 2);
	}
	/*
	 * profile.proto as pprof reads it: Sample.label is field 3, Label's
	 * key 1, str 2, num 3, num_unit 4.  The timestamp label must be in
	 * the bytes as 0x1a LEN 08 key 18 num 20 unit (str 0 is left out).
	 */
	int64_t k = str_index(pb, "timestamp"),
	        u = str_index(pb, "nanoseconds");
	CHECK(k > 0 && u > 0);
	uint8_t lab[32], want[40];
	size_t n = 0;
	lab[n++] = 0x08;
	n += put_varint(lab + n, (uint64_t)k);
	lab[n++] = 0x18;
	n += put_varint(lab + n, 123456789012ULL);
	lab[n++] = 0x20;
	n += put_varint(lab + n, (uint64_t)u);
	size_t m = 0;
	want[m++] = 0x1a;
	m += put_varint(want + m, n);
	memcpy(want + m, lab, n);
	m += n;
	CHECK(contains(buf, len, want, m));
	/* The address label: 0x1a LEN 08 key 10 str. */
	int64_t ka = str_index(pb, "address"),
	        sa = str_index(pb, "0x7f0000001230");
	n = 0;
	lab[n++] = 0x08;
	n += put_varint(lab + n, (uint64_t)ka);
	lab[n++] = 0x10;
	n += put_varint(lab + n, (uint64_t)sa);
	m = 0;
	want[m++] = 0x1a;
	m += put_varint(want + m, n);
	memcpy(want + m, lab, n);
	m += n;
	CHECK(ka > 0 && sa > 0 && contains(buf, len, want, m));
	perftools__profiles__profile__free_unpacked(pb, NULL);
	free(buf);
	pp_free(p);
}

/* The written file is gzip and holds what pp_encode gives. */
static void test_write_gz(void)
{
	char path[] = "/tmp/heapprof-test-pprof-XXXXXX";
	int fd = mkstemp(path);
	struct pp_profile *p = pp_new(512);
	int64_t v[RD_NVIEWS] = {10, 20, 1, 2};
	uint8_t *raw = NULL, back[65536];
	size_t nraw = 0;

	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK(pp_add_sample(p, &stacks, 2, v, NULL, NULL) == 0);
	CHECK(pp_write_gz(p, path, "test") == 0);
	CHECK(pp_encode(p, &raw, &nraw) == 0);
	gzFile gz = gzopen(path, "rb");
	CHECK(gz != NULL);
	if (gz) {
		int n = gzread(gz, back, sizeof(back));
		CHECK(n >= 0 && (size_t)n == nraw);
		CHECK(n >= 0 && (size_t)n == nraw && !memcmp(back, raw, nraw));
		CHECK(gzdirect(gz) == 0); /* really compressed */
		gzclose(gz);
	}
	free(raw);
	unlink(path);
	/* A path that cannot be written: an error, no crash. */
	CHECK(pp_write_gz(p, "/nonexistent-dir/x.pb.gz", "test") < 0);
	pp_free(p);
}

/* The symbols a symbol server answers with: each named location's
 * address and its innermost function, sorted; no entry for an unnamed
 * frame, a synthetic one (no address) or an address not in the profile. */
static void test_symtab(void)
{
	struct pp_profile *p = pp_new(1);
	struct pp_symtab t;
	int64_t v[RD_NVIEWS] = {1, 1, 1, 1};

	for (int64_t cs = 1; cs <= 6; cs++)
		CHECK(pp_add_sample(p, &stacks, cs, v, NULL, NULL) == 0);
	CHECK(pp_symtab_make(p, &t) == 0);
	/* main, leaf (inner at outer's address), ns::f, and the unnamed
	 * and [unknown] frames by the names every view gives them; the
	 * synthetic frames (no address) have none */
	CHECK_EQ_U64(t.n, 5);
	for (size_t i = 1; i < t.n; i++)
		CHECK(t.syms[i - 1].address < t.syms[i].address);
	const struct pp_sym *y = pp_symtab_find(&t, BASE + 0x1234 - 1);
	CHECK(y && !strcmp(y->name, "inner"));
	y = pp_symtab_find(&t, BASE + 0x1500 - 1);
	CHECK(y && !strcmp(y->name, "main"));
	y = pp_symtab_find(&t, BASE + 0x1900 - 1);
	CHECK(y && !strcmp(y->name, "ns::f(int)"));
	y = pp_symtab_find(&t, BASE + 0x1800 - 1);
	CHECK(y && !strcmp(y->name, "prog+0x1800"));
	y = pp_symtab_find(&t, 0x7f0000001000ULL - 1);
	CHECK(y && !strncmp(y->name, "[unknown]+0x", 12));
	CHECK(pp_symtab_find(&t, 0) == NULL);
	CHECK(pp_symtab_find(&t, BASE + 0x1500) == NULL);
	pp_symtab_free(&t);
	CHECK(t.n == 0 && t.syms == NULL);
	pp_free(p);
}

int main(void)
{
	static const struct unit_test tests[] = {
	        {"header", test_header},
	        {"samples", test_samples},
	        {"two_sources", test_two_sources},
	        {"labels", test_labels},
	        {"write_gz", test_write_gz},
	        {"symtab", test_symtab},
	        {NULL, NULL},
	};
	return unit_main("pprof", tests);
}
