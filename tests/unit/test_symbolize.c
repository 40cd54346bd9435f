/*
 * Unit tests of the online symbolizer: names of functions in this test
 * binary and in libstdc++ (found through dl_iterate_phdr, with their build
 * IDs read from the loaded notes, as the client does), the build-ID check,
 * and C++ demangling.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	/* A mangled function exported by libstdc++ (linked into heapprof). */
	void *fn = dlsym(RTLD_DEFAULT, "_ZSt9terminatev");
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

static void test_hex(void)
{
	uint8_t id[3] = {0x0a, 0xbc, 0xff};
	char buf[7];
	CHECK(!strcmp(symbolize_hex(buf, id, 3), "0abcff"));
}

int main(void)
{
	static const struct unit_test tests[] = {
	        {"own_function", test_own_function},
	        {"wrong_build_id", test_wrong_build_id},
	        {"missing_and_special", test_missing_and_special},
	        {"shared_library_cxx", test_shared_library_cxx},
	        {"demangle", test_demangle},
	        {"hex", test_hex},
	        {NULL, NULL},
	};
	return unit_main("symbolize", tests);
}
