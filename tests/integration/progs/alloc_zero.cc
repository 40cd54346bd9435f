// alloc_zero: allocations of 0 bytes (test_allocators.sh): 10 x malloc(0)
// in zero_malloc, 5 x new char[0] (operator new[](0)) in zero_new, all
// freed; 3 x malloc(16) in some_alloc, kept.  Prints "done"; exits 0.
#include <cstdio>
#include <cstdlib>

static void *keep[3];

extern "C" {
void zero_malloc();
void zero_new();
void some_alloc();
}

__attribute__((noinline)) void zero_malloc()
{
	for (int i = 0; i < 10; i++)
		std::free(std::malloc(0));
}

__attribute__((noinline)) void zero_new()
{
	for (int i = 0; i < 5; i++) {
		char *p = new char[0];
		delete[] p;
	}
}

__attribute__((noinline)) void some_alloc()
{
	for (int i = 0; i < 3; i++)
		keep[i] = std::malloc(16);
}

int main()
{
	zero_malloc();
	zero_new();
	some_alloc();
	std::puts("done");
	return 0;
}
