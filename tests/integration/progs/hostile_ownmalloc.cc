// hostile_ownmalloc: an executable with its own malloc family (a bump
// arena, as some programs and games carry), which every call of the
// program and of its libraries reaches, libstdc++'s operator new
// included.  Prints how many allocations and bytes its arena served for
// 1000 strings made with new (and their vector), and for 200 aligned
// objects; then deletes them all.  Bare and profiled must print the same:
// a profiler's operator new must not send them to glibc (issue 18, 14).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

namespace
{
alignas(64) unsigned char arena[64 << 20];
size_t used;
unsigned long served, freed;

void *take(size_t n, size_t align)
{
	if (align < 16)
		align = 16;
	size_t start = (used + 16 + align - 1) & ~(align - 1);
	if (n > sizeof(arena) || start > sizeof(arena) - n)
		return nullptr;
	std::memcpy(arena + start - 16, &n, sizeof(n));
	used = start + n;
	served++;
	return arena + start;
}

bool ours(const void *p)
{
	return p >= static_cast<const void *>(arena) &&
	       p < static_cast<const void *>(arena + sizeof(arena));
}
} // namespace

extern "C" {
void *malloc(size_t n)
{
	return take(n, 16);
}
void free(void *p)
{
	if (p && ours(p))
		freed++;
}
void *calloc(size_t a, size_t b)
{
	size_t n;
	if (__builtin_mul_overflow(a, b, &n))
		return nullptr;
	void *p = take(n, 16);
	if (p)
		std::memset(p, 0, n);
	return p;
}
void *realloc(void *p, size_t n)
{
	void *q = take(n, 16);
	if (q && p) {
		size_t old;
		std::memcpy(&old, static_cast<unsigned char *>(p) - 16,
		            sizeof(old));
		std::memcpy(q, p, old < n ? old : n);
	}
	return q;
}
void *aligned_alloc(size_t a, size_t n)
{
	return take(n, a);
}
void *memalign(size_t a, size_t n)
{
	return take(n, a);
}
int posix_memalign(void **out, size_t a, size_t n)
{
	void *p = take(n, a);
	if (!p)
		return 12;
	*out = p;
	return 0;
}
}

struct alignas(256) Wide {
	unsigned char bytes[256];
};

int main()
{
	unsigned long s0 = served;
	size_t u0 = used;
	std::vector<std::string *> v;
	for (int i = 0; i < 1000; i++)
		v.push_back(new std::string(100 + i % 7, 'x'));
	std::vector<Wide *> w;
	w.reserve(200);
	for (int i = 0; i < 200; i++)
		w.push_back(new Wide());
	unsigned long in_arena = served - s0;
	size_t bytes = used - u0;
	unsigned long aligned = 0;
	for (Wide *p : w)
		aligned +=
		        ours(p) && (reinterpret_cast<uintptr_t>(p) & 255) == 0;
	unsigned long f0 = freed;
	for (std::string *s : v)
		delete s;
	for (Wide *p : w)
		delete p;
	std::printf("new served by the program's arena: %lu allocations, "
	            "%zu bytes; aligned in it: %lu; deletes back in it: %lu\n",
	            in_arena, bytes, aligned, freed - f0);
	return 0;
}
