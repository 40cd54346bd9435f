/*
 * Unit tests of the symbolizer: names of functions in this test binary and
 * in libstdc++ (found through dl_iterate_phdr, with their build IDs read
 * from the loaded notes, as the client does), the build-ID check, C++
 * demangling; source lines and the inline chain from DWARF; and the
 * offline lookup of module files (locate.h): the five binary-path
 * candidates, build-ID matching, index mode and the recorded path.
 */
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize/locate.h"
#include "symbolize/symbolize.h"
#include "selfmod.h"
#include "unit.h"

/* Looked up by address; noinline keeps a symbol with its own body. */
__attribute__((noinline)) int symtest_target_function(int x);
__attribute__((noinline)) int symtest_target_function(int x)
{
	return x * 3 + 1;
}

static void test_own_function(void)
{
	struct selfmod f = selfmod_find((const void *)symtest_target_function);
	struct symbolizer *s = symbolizer_new();
	struct sym_result r;

	CHECK(f.ok);
	CHECK(f.build_id_len > 0);
	/* A return address one byte into the function. */
	uint64_t rel = (uintptr_t)symtest_target_function - f.base + 1;
	CHECK(symbolizer_lookup(s, f.path, f.build_id, f.build_id_len, rel,
	                        &r) == 0);
	CHECK(r.name && !strcmp(r.name, "symtest_target_function"));
	CHECK(r.system_name &&
	      !strcmp(r.system_name, "symtest_target_function"));
	sym_result_fini(&r);
	/* Same module again: served from the cache. */
	CHECK(symbolizer_lookup(s, f.path, f.build_id, f.build_id_len, rel + 2,
	                        &r) == 0);
	CHECK(r.name && !strcmp(r.name, "symtest_target_function"));
	sym_result_fini(&r);
	symbolizer_free(s);
}

static void test_wrong_build_id(void)
{
	struct selfmod f = selfmod_find((const void *)symtest_target_function);
	struct symbolizer *s = symbolizer_new();
	struct sym_result r;
	uint64_t rel = (uintptr_t)symtest_target_function - f.base + 1;

	f.build_id[0] ^= 0xff;
	CHECK(symbolizer_lookup(s, f.path, f.build_id, f.build_id_len, rel,
	                        &r) == 0);
	CHECK(r.name == NULL && r.system_name == NULL);
	/* No recorded build ID while the file has one: not trusted either. */
	CHECK(symbolizer_lookup(s, f.path, NULL, 0, rel, &r) == 0);
	CHECK(r.name == NULL);
	symbolizer_free(s);
}

static void test_missing_and_special(void)
{
	struct symbolizer *s = symbolizer_new();
	struct sym_result r;
	uint8_t id[4] = {1, 2, 3, 4};

	CHECK(symbolizer_lookup(s, "/nonexistent/libnothing.so", id, 4, 0x1234,
	                        &r) == 0);
	CHECK(r.name == NULL);
	/* Tried once: a second lookup gives the same answer. */
	CHECK(symbolizer_lookup(s, "/nonexistent/libnothing.so", id, 4, 0x1238,
	                        &r) == 0);
	CHECK(r.name == NULL);
	CHECK(symbolizer_lookup(s, "[vdso]", NULL, 0, 0x10, &r) == 0);
	CHECK(r.name == NULL);
	CHECK(symbolizer_lookup(s, "", NULL, 0, 0x10, &r) == 0);
	CHECK(r.name == NULL);
	symbolizer_free(s);
}

static void test_shared_library_cxx(void)
{
	/* A mangled function exported by libstdc++ (loaded here: heapprof
	 * itself no longer links it), kept loaded. */
	void *cxx = dlopen("libstdc++.so.6", RTLD_NOW);
	void *fn = cxx ? dlsym(cxx, "_ZSt9terminatev") : NULL;
	struct symbolizer *s = symbolizer_new();
	struct sym_result r = {NULL, NULL};

	CHECK(fn != NULL);
	if (!fn) {
		symbolizer_free(s);
		return;
	}
	struct selfmod f = selfmod_find(fn);
	CHECK(f.ok && f.base != 0);
	uint64_t rel = (uintptr_t)fn - f.base + 1;
	CHECK(symbolizer_lookup(s, f.path, f.build_id, f.build_id_len, rel,
	                        &r) == 0);
	CHECK(r.system_name && !strcmp(r.system_name, "_ZSt9terminatev"));
	CHECK(r.name && !strcmp(r.name, "std::terminate()"));
	sym_result_fini(&r);
	symbolizer_free(s);
}

static void test_demangle(void)
{
	char *d = symbolize_demangle("_ZN3foo3barEi");
	CHECK(d && !strcmp(d, "foo::bar(int)"));
	free(d);
	d = symbolize_demangle("_ZNSt6vectorIiSaIiEE9push_backERKi");
	CHECK(d && !strcmp(d, "std::vector<int, std::allocator<int> >::"
	                      "push_back(int const&)"));
	free(d);
	CHECK(symbolize_demangle("malloc") == NULL);
	CHECK(symbolize_demangle("_Znotvalid!") == NULL);
	CHECK(symbolize_demangle(NULL) == NULL);
}

/* Each mangled name and what symbolize_demangle must make of it. */
static const char *const demangled[][2] = {
        /* C++: as __cxa_demangle writes them (the C++ demangler before
         * libiberty's), templates, operators, clones, ABI tags. */
        {"_ZNKSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE5c_strEv",
         "std::__cxx11::basic_string<char, std::char_traits<char>, "
         "std::allocator<char> >::c_str() const"},
        {"_ZnwmRKSt9nothrow_t", "operator new(unsigned long, "
                                "std::nothrow_t const&)"},
        {"_ZN2ns5ThingIiE4makeEi.constprop.0",
         "ns::Thing<int>::make(int) [clone .constprop.0]"},
        {"_ZN12_GLOBAL__N_15innerEv", "(anonymous namespace)::inner()"},
        {"_ZNSt6vectorIiSaIiEE17_M_realloc_insertIJRKiEEEvN9__gnu_cxx"
         "17__normal_iteratorIPiS1_EEDpOT_",
         "void std::vector<int, std::allocator<int> >::_M_realloc_insert"
         "<int const&>(__gnu_cxx::__normal_iterator<int*, std::vector<int, "
         "std::allocator<int> > >, int const&)"},
        /* A C++ name with ThinLTO's suffix: the name alone. */
        {"_ZN3foo3barEi.llvm.1234567890", "foo::bar(int)"},
        /* Rust, legacy mangling: no ::h<hash>, $-escapes decoded. */
        {"_ZN5alloc7raw_vec11finish_grow17h0a31523492e1b22fE",
         "alloc::raw_vec::finish_grow"},
        {"_ZN5rprog5store5table4fill17hdabbf7c4fe287274E",
         "rprog::store::table::fill"},
        {"_ZN5alloc7raw_vec19RawVec$LT$T$C$A$GT$14grow_amortized17h397a781f"
         "76ddfe6bE",
         "alloc::raw_vec::RawVec<T,A>::grow_amortized"},
        {"_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$"
         "..$u7b$$u7b$closure$u7d$$u7d$$GT$17h1b2c3d4e5f607182E",
         "core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>"},
        {"_ZN3std2rt10lang_start17h68e0d9d3985db8bcE.llvm.8723642511",
         "std::rt::lang_start"},
        /* Rust, v0 mangling (rustc's std since 1.80ish): no crate
         * disambiguators. */
        {"_RNvMs4_NtCslNYArtu3iFV_5alloc7raw_vecNtB5_11RawVecInner11finish_"
         "growCsjrHSEGnQ3l9_3std",
         "<alloc::raw_vec::RawVecInner>::finish_grow"},
        {"_RNvNtCsjrHSEGnQ3l9_3std2rt19lang_start_internal",
         "std::rt::lang_start_internal"},
        /* Not a Rust name after all (no hash): the C++ reading. */
        {"_ZN3std2rt10lang_startE", "std::rt::lang_start"},
};

static void test_demangle_rust(void)
{
	for (size_t i = 0; i < sizeof(demangled) / sizeof(demangled[0]); i++) {
		char *d = symbolize_demangle(demangled[i][0]);
		if (!d || strcmp(d, demangled[i][1]) != 0)
			fprintf(stderr, "  %s\n    -> %s\n    want %s\n",
			        demangled[i][0], d ? d : "(null)",
			        demangled[i][1]);
		CHECK(d && !strcmp(d, demangled[i][1]));
		free(d);
	}
	CHECK(symbolize_demangle("_Rnotvalid") == NULL);
	CHECK(symbolize_demangle("rust_metadata_std_9df11b70ee34264e") == NULL);
}

static void test_hex(void)
{
	uint8_t id[3] = {0x0a, 0xbc, 0xff};
	char buf[7];
	CHECK(!strcmp(symbolize_hex(buf, id, 3), "0abcff"));
}

/* ---- source lines and inline chains ------------------------------------ */

static void *volatile ret_sink;

/* The return address into its caller. */
__attribute__((noinline)) static void *return_address(void)
{
	void *r = __builtin_return_address(0);
	__asm__ volatile("" ::: "memory");
	return r;
}

static const int inlined_call_line = __LINE__ + 4;
static inline __attribute__((always_inline)) void *symtest_inlined(void)
{
	void *r;
	r = return_address();
	ret_sink = r;
	return r;
}

static const int outer_call_line = __LINE__ + 4;
__attribute__((noinline)) void *symtest_outer(void);
__attribute__((noinline)) void *symtest_outer(void)
{
	void *r = symtest_inlined();
	ret_sink = r; /* no tail call */
	return r;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t ls = s ? strlen(s) : 0, lx = strlen(suffix);
	return s && ls >= lx && !strcmp(s + ls - lx, suffix);
}

static void test_source_inline_chain(void)
{
	void *ra = symtest_outer();
	struct selfmod f = selfmod_find(ra);
	struct symbolizer *s = symbolizer_new();
	struct sym_source *v = NULL;
	size_t n = 0;

	CHECK(f.ok);
	CHECK(symbolizer_has_dwarf(s, f.path, f.build_id, f.build_id_len) == 1);
	uint64_t rel = (uintptr_t)ra - f.base;
	CHECK(symbolizer_lookup_source(s, f.path, f.build_id, f.build_id_len,
	                               rel, &v, &n) == 0);
	CHECK_EQ_U64(n, 2);
	if (n == 2) {
		/* Innermost inlined function first, at the call it makes. */
		CHECK(v[0].name && !strcmp(v[0].name, "symtest_inlined"));
		CHECK(ends_with(v[0].source_file, "test_symbolize.c"));
		CHECK_EQ_U64(v[0].line, inlined_call_line);
		/* Then the function it was inlined into, at the call site. */
		CHECK(v[1].name && !strcmp(v[1].name, "symtest_outer"));
		CHECK(ends_with(v[1].source_file, "test_symbolize.c"));
		CHECK_EQ_U64(v[1].line, outer_call_line);
	}
	sym_source_free(v, n);
	/* Another build ID: nothing. */
	f.build_id[0] ^= 0xff;
	CHECK(symbolizer_lookup_source(s, f.path, f.build_id, f.build_id_len,
	                               rel, &v, &n) == 0);
	CHECK(v == NULL && n == 0);
	CHECK(symbolizer_has_dwarf(s, f.path, f.build_id, f.build_id_len) ==
	      -1);
	symbolizer_free(s);
}

/* ---- locating module files ---------------------------------------------- */

static int cand_is(char *c[], int n, int i, const char *want)
{
	return i < n && !strcmp(c[i], want);
}

static void free_cands(char *c[], int n)
{
	for (int i = 0; i < n; i++)
		free(c[i]);
}

static void test_candidates(void)
{
	char *c[LOCATE_MAX_CANDIDATES];

	/* The seed's example. */
	int n = locate_candidates("/bp", "/system/lib/base.apk!foo.so",
	                          "abcd1234", c);
	CHECK_EQ_U64(n, 5);
	CHECK(cand_is(c, n, 0, "/bp/system/lib/base.apk!foo.so"));
	CHECK(cand_is(c, n, 1, "/bp/system/lib/foo.so"));
	CHECK(cand_is(c, n, 2, "/bp/base.apk!foo.so"));
	CHECK(cand_is(c, n, 3, "/bp/foo.so"));
	CHECK(cand_is(c, n, 4, "/bp/.build-id/ab/cd1234.debug"));
	free_cands(c, n);

	/* No "base.apk!": steps 2 and 4 would repeat 1 and 3. */
	n = locate_candidates("/bp/", "/usr/lib/libx.so.1", "0011", c);
	CHECK_EQ_U64(n, 3);
	CHECK(cand_is(c, n, 0, "/bp/usr/lib/libx.so.1"));
	CHECK(cand_is(c, n, 1, "/bp/libx.so.1"));
	CHECK(cand_is(c, n, 2, "/bp/.build-id/00/11.debug"));
	free_cands(c, n);

	/* A relative path and no usable build ID. */
	n = locate_candidates("d", "prog", NULL, c);
	CHECK_EQ_U64(n, 1);
	CHECK(cand_is(c, n, 0, "d/prog"));
	free_cands(c, n);
}

static void test_build_id_helpers(void)
{
	uint8_t b[4];
	char want[65], longer[81];

	CHECK(locate_build_id_matches("abcd", "abcd"));
	CHECK(!locate_build_id_matches("abcd", "abce"));
	CHECK(!locate_build_id_matches("abcd", "abcdef"));
	CHECK(!locate_build_id_matches("", ""));
	CHECK(!locate_build_id_matches("abcd", NULL));
	/* The client keeps 32 bytes of a longer ID: a prefix matches. */
	memset(want, 'a', 64);
	want[64] = '\0';
	memset(longer, 'a', 80);
	longer[80] = '\0';
	CHECK(locate_build_id_matches(want, longer));
	longer[10] = 'b';
	CHECK(!locate_build_id_matches(want, longer));

	CHECK(locate_hex_bytes("0aFf", b, 4) == 2 && b[0] == 0x0a &&
	      b[1] == 0xff);
	CHECK(locate_hex_bytes("abc", b, 4) == -1);
	CHECK(locate_hex_bytes("zz", b, 4) == -1);
	CHECK(locate_hex_bytes("0011223344", b, 4) == -1);
}

/* A scratch directory with copies (symlinks) of this test binary. */
struct scratch {
	char dir[256];
	char self[4096];
	char hex[129];
};

static int scratch_init(struct scratch *sc)
{
	struct selfmod f = selfmod_find((const void *)symtest_target_function);
	snprintf(sc->dir, sizeof(sc->dir), "%s/symtest.XXXXXX",
	         getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!f.ok || !f.build_id_len || !mkdtemp(sc->dir))
		return -1;
	snprintf(sc->self, sizeof(sc->self), "%s", f.path);
	symbolize_hex(sc->hex, f.build_id, f.build_id_len);
	return 0;
}

static void scratch_path(const struct scratch *sc, char *buf, size_t len,
                         const char *rel)
{
	snprintf(buf, len, "%s/%s", sc->dir, rel);
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw)
{
	return remove(path);
}

static void scratch_fini(const struct scratch *sc)
{
	CHECK(nftw(sc->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0);
}

static void test_locate_binary_path(void)
{
	struct scratch sc;
	struct locate_result r;
	char p[4096], d2[4096], bp[8192];

	CHECK(scratch_init(&sc) == 0);
	/* dir2/renamed.so is this binary: found through step 3 (basename)
	 * for any recorded directory. */
	scratch_path(&sc, d2, sizeof(d2), "dir2");
	CHECK(mkdir(d2, 0700) == 0);
	scratch_path(&sc, p, sizeof(p), "dir2/renamed.so");
	CHECK(symlink(sc.self, p) == 0);
	/* dir1 has a different ELF under the same name: skipped. */
	scratch_path(&sc, p, sizeof(p), "dir1");
	CHECK(mkdir(p, 0700) == 0);
	scratch_path(&sc, p, sizeof(p), "dir1/renamed.so");
	CHECK(symlink("/bin/sh", p) == 0);
	snprintf(bp, sizeof(bp), "%s/dir1::%s/missing:%s", sc.dir, sc.dir, d2);

	struct sym_locator *l = locator_new(bp, 0, 0);
	CHECK(l != NULL);
	CHECK_EQ_U64(locator_ndirs(l), 3);
	CHECK(locator_find(l, "/elsewhere/renamed.so", sc.hex, &r) == 0);
	char *real = realpath(sc.self, NULL);
	CHECK(r.file && real && !strcmp(r.file, real));
	CHECK(r.how && !strcmp(r.how, "binary path"));
	locate_result_fini(&r);

	/* Another build ID: not found, the mismatching file reported. */
	CHECK(locator_find(l, "/elsewhere/renamed.so", "00112233", &r) == 0);
	CHECK(r.file == NULL);
	scratch_path(&sc, p, sizeof(p), "dir1/renamed.so");
	CHECK(r.other && !strcmp(r.other, p));
	locate_result_fini(&r);
	locator_free(l);

	/* No binary path: only the recorded path itself. */
	l = locator_new(NULL, 0, 0);
	CHECK(locator_find(l, sc.self, sc.hex, &r) == 0);
	CHECK(r.file && real && !strcmp(r.file, real));
	CHECK(r.how && !strcmp(r.how, "original path"));
	locate_result_fini(&r);
	CHECK(locator_find(l, "/elsewhere/renamed.so", sc.hex, &r) == 0);
	CHECK(r.file == NULL && r.other == NULL);
	locate_result_fini(&r);
	locator_free(l);
	free(real);
	scratch_fini(&sc);
}

static void test_locate_index(void)
{
	struct scratch sc;
	struct locate_result r;
	char p[4096];

	CHECK(scratch_init(&sc) == 0);
	scratch_path(&sc, p, sizeof(p), "a");
	CHECK(mkdir(p, 0700) == 0);
	scratch_path(&sc, p, sizeof(p), "a/b");
	CHECK(mkdir(p, 0700) == 0);
	scratch_path(&sc, p, sizeof(p), "a/b/any-name");
	CHECK(symlink(sc.self, p) == 0);
	/* Loops: to an ancestor, and to itself. */
	scratch_path(&sc, p, sizeof(p), "a/b/up");
	CHECK(symlink("..", p) == 0);
	scratch_path(&sc, p, sizeof(p), "a/self");
	CHECK(symlink(".", p) == 0);

	struct sym_locator *l = locator_new(sc.dir, 1, 0);
	CHECK(locator_find(l, "/recorded/elsewhere.so", sc.hex, &r) == 0);
	CHECK(r.how && !strcmp(r.how, "index"));
	char *real = realpath(sc.self, NULL);
	char *got = r.file ? realpath(r.file, NULL) : NULL;
	CHECK(got && real && !strcmp(got, real));
	free(got);
	free(real);
	locate_result_fini(&r);
	CHECK(locator_find(l, "/recorded/elsewhere.so", "0123", &r) == 0);
	CHECK(r.file == NULL);
	locate_result_fini(&r);
	locator_free(l);
	scratch_fini(&sc);
}

static void test_file_build_id(void)
{
	struct scratch sc;
	char *hex = NULL;
	char p[4096];

	CHECK(scratch_init(&sc) == 0);
	CHECK(locate_file_build_id(sc.self, &hex) == 0);
	CHECK(hex && !strcmp(hex, sc.hex));
	free(hex);
	CHECK(locate_file_build_id("/nonexistent/x", &hex) == -ENOENT);
	CHECK(locate_file_build_id(sc.dir, &hex) == -ENOENT);
	scratch_path(&sc, p, sizeof(p), "text");
	FILE *fp = fopen(p, "w");
	CHECK(fp != NULL);
	if (fp) {
		fputs("not an ELF file\n", fp);
		fclose(fp);
	}
	CHECK(locate_file_build_id(p, &hex) == -ENOEXEC);
	CHECK(hex == NULL);
	scratch_fini(&sc);
}

int main(void)
{
	static const struct unit_test tests[] = {
	        {"own_function", test_own_function},
	        {"wrong_build_id", test_wrong_build_id},
	        {"missing_and_special", test_missing_and_special},
	        {"shared_library_cxx", test_shared_library_cxx},
	        {"demangle", test_demangle},
	        {"demangle_rust", test_demangle_rust},
	        {"hex", test_hex},
	        {"source_inline_chain", test_source_inline_chain},
	        {"candidates", test_candidates},
	        {"build_id_helpers", test_build_id_helpers},
	        {"locate_binary_path", test_locate_binary_path},
	        {"locate_index", test_locate_index},
	        {"file_build_id", test_file_build_id},
	        {NULL, NULL},
	};
	return unit_main("symbolize", tests);
}
