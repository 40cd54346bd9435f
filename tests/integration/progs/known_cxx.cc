// known_cxx: C++ allocations of known count and size in known functions,
// for exact checks with `heapprof record -i 1` (the expected numbers and
// their arithmetic are in tests/integration/test_exact.sh).
//
// Every allocating function is noinline and calls operator new directly (no
// std:: containers, whose allocator frames would be the leaf).  Frame names
// are demangled: "do_new()", "do_new_array()", ...  Exits 9 on success.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile unsigned long sink;
static int failures;

static void touch(void *p, std::size_t n)
{
	if (!p) {
		failures++;
		return;
	}
	std::memset(p, 0x33, n);
	sink += static_cast<unsigned char *>(p)[n - 1];
}

struct Obj48 {
	char b[48];
};
struct Obj200 {
	char b[200];
};
// Non-trivial destructor: new WithDtor[n] asks operator new[] for
// n * 16 + 8 bytes (the Itanium C++ ABI array cookie on LP64).
struct WithDtor {
	long a, b;
	~WithDtor()
	{
		sink += static_cast<unsigned long>(a);
	}
};
struct alignas(64) Aligned64 {
	char b[192];
};
static_assert(sizeof(Obj48) == 48, "Obj48");
static_assert(sizeof(WithDtor) == 16, "WithDtor");
static_assert(sizeof(Aligned64) == 192, "Aligned64");

// 30 x new Obj48 (operator new(48)); deletes 10 (sized delete under C++14+).
static Obj48 *new_keep[30];
NOINLINE void do_new()
{
	for (int i = 0; i < 30; i++) {
		new_keep[i] = new Obj48;
		touch(new_keep[i], sizeof(Obj48));
	}
	for (int i = 0; i < 10; i++) {
		delete new_keep[i];
		new_keep[i] = nullptr;
	}
}

// 20 x new char[1000] (operator new[](1000)); delete[] all.
NOINLINE void do_new_array()
{
	char *p[20];
	for (int i = 0; i < 20; i++) {
		p[i] = new char[1000];
		touch(p[i], 1000);
	}
	for (int i = 0; i < 20; i++)
		delete[] p[i];
}

// 4 x new WithDtor[10] (operator new[](10 * 16 + 8 = 168)); delete[] 2
// (sized array delete with the cookie).
static WithDtor *cookie_keep[4];
NOINLINE void do_new_array_cookie()
{
	for (int i = 0; i < 4; i++) {
		cookie_keep[i] = new WithDtor[10];
		for (int k = 0; k < 10; k++)
			cookie_keep[i][k].a = k;
	}
	for (int i = 0; i < 2; i++) {
		delete[] cookie_keep[i];
		cookie_keep[i] = nullptr;
	}
}

// 15 x new (std::nothrow) Obj200 (operator new(200, nothrow)); deletes 5.
static Obj200 *nothrow_keep[15];
NOINLINE void do_nothrow_new()
{
	for (int i = 0; i < 15; i++) {
		nothrow_keep[i] = new (std::nothrow) Obj200;
		touch(nothrow_keep[i], sizeof(Obj200));
	}
	for (int i = 0; i < 5; i++) {
		delete nothrow_keep[i];
		nothrow_keep[i] = nullptr;
	}
}

// Aligned new:
//   8 x new Aligned64        operator new(192, align_val_t(64)); deletes 3
//   4 x ::operator new(1024, std::align_val_t(128)); all deleted
//   2 x new Aligned64[3]     operator new[](576, align_val_t(64)); live
static Aligned64 *aligned_keep[8];
static Aligned64 *aligned_arr_keep[2];
NOINLINE void do_aligned_new()
{
	for (int i = 0; i < 8; i++) {
		aligned_keep[i] = new Aligned64;
		if (reinterpret_cast<unsigned long>(aligned_keep[i]) & 63)
			failures++;
		touch(aligned_keep[i], sizeof(Aligned64));
	}
	for (int i = 0; i < 3; i++) {
		delete aligned_keep[i];
		aligned_keep[i] = nullptr;
	}
	void *raw[4];
	for (int i = 0; i < 4; i++) {
		raw[i] = ::operator new(1024, std::align_val_t(128));
		if (reinterpret_cast<unsigned long>(raw[i]) & 127)
			failures++;
		touch(raw[i], 1024);
	}
	for (int i = 0; i < 4; i++)
		::operator delete(raw[i], std::align_val_t(128));
	for (int i = 0; i < 2; i++) {
		aligned_arr_keep[i] = new Aligned64[3];
		touch(aligned_arr_keep[i], 3 * sizeof(Aligned64));
	}
}

// Failed allocations are not allocations: no rows for do_new_fail().
//   new char[huge] throws std::bad_alloc (through the profiler's hook),
//   new (std::nothrow) char[huge] returns nullptr,
//   aligned new of a huge size throws too.
static volatile std::size_t huge_size = static_cast<std::size_t>(-1) / 2 - 4096;
static int caught;
NOINLINE void do_new_fail()
{
	try {
		char *p = new char[huge_size];
		failures++;
		delete[] p;
	} catch (const std::bad_alloc &) {
		caught++;
	}
	char *q = new (std::nothrow) char[huge_size];
	if (q) {
		failures++;
		delete[] q;
	}
	try {
		void *r = ::operator new(huge_size, std::align_val_t(64));
		failures++;
		::operator delete(r, std::align_val_t(64));
	} catch (const std::bad_alloc &) {
		caught++;
	}
	if (caught != 2)
		failures++;
}

// A C allocation in C++ code: 5 x malloc(64), all live; the leaf is the
// C++ function "do_cxx_malloc()".
static void *cxx_malloc_keep[5];
NOINLINE void do_cxx_malloc()
{
	for (int i = 0; i < 5; i++) {
		cxx_malloc_keep[i] = std::malloc(64);
		touch(cxx_malloc_keep[i], 64);
	}
}

int main()
{
	std::fprintf(stderr, "known_cxx: pid %d\n", static_cast<int>(getpid()));
	do_new();
	do_new_array();
	do_new_array_cookie();
	do_nothrow_new();
	do_aligned_new();
	do_new_fail();
	do_cxx_malloc();
	std::printf("known_cxx: failures %d\n", failures);
	return failures ? 1 : 9;
}
