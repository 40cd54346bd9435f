/*
 * Unit tests of the trace's chunk codec (src/store/evchunk.c): every
 * event decodes back exactly, field by field, for random events and for
 * the cases the encoding treats specially (frees of allocations of the
 * chunk, equal and decreasing times, reused addresses, frees with no
 * allocation or one that differs from theirs, heaps and threads changing,
 * extreme 64-bit values); damaged blobs are refused, never read past.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/evchunk.h"
#include "unit.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

static int same(const struct evc_event *a, const struct evc_event *b)
{
	return a->ts == b->ts && a->address == b->address &&
	       a->size == b->size && a->charged == b->charged &&
	       a->stack_key == b->stack_key && a->alloc_ts == b->alloc_ts &&
	       a->tid == b->tid && a->heap == b->heap && a->free == b->free;
}

static struct evc_enc *enc;
static struct evc_dec *dec;

/* Encode ev, decode it, compare every field of every event. */
static void roundtrip(const struct evc_event *ev, size_t n, int level)
{
	const void *blob;
	size_t len;
	CHECK(evc_encode(enc, ev, n, level, &blob, &len) == 0);
	const struct evc_event *out = NULL;
	size_t m = 0;
	CHECK(evc_decode(dec, blob, len, &out, &m) == 0);
	CHECK_EQ_U64(m, n);
	size_t bad = 0;
	for (size_t i = 0; out && i < n && i < m; i++)
		if (!same(&ev[i], &out[i])) {
			if (!bad)
				fprintf(stderr, "event %zu differs\n", i);
			bad++;
		}
	CHECK_EQ_U64(bad, 0);
}

static void test_random(void)
{
	enum { N = 5000 };
	static struct evc_event ev[N];
	for (int round = 0; round < 20; round++) {
		for (size_t i = 0; i < N; i++)
			ev[i] = (struct evc_event){
			        .ts = (int64_t)rnd(),
			        .address = (int64_t)rnd(),
			        .size = (int64_t)rnd(),
			        .charged = (int64_t)(rnd() & 1 ? rnd() : 0),
			        .stack_key = (int64_t)rnd(),
			        .alloc_ts = (int64_t)(rnd() & 1 ? rnd() : 0),
			        .tid = (uint32_t)rnd(),
			        .heap = (uint32_t)rnd(),
			        .free = (uint32_t)(rnd() & 1),
			};
		roundtrip(ev, N, round % 3 + 1);
	}
}

/*
 * A program's pattern: a few threads, each allocating from a small pool
 * of addresses (reuse) and freeing soon after, times that collide and go
 * back between threads, frees of blocks allocated before the chunk, and
 * frees that name an allocation of the chunk but differ from it.
 */
static void test_program(void)
{
	enum { N = 65536 };
	static struct evc_event ev[N];
	int64_t clock = 1000;
	size_t n = 0;
	while (n < N) {
		uint32_t tid = 100 + (uint32_t)(rnd() % 4);
		/* Equal times, and times that go back by up to 50 ns. */
		int64_t ts = clock +
		             (int64_t)(rnd() % 3 == 0 ? 0 : rnd() % 100) -
		             (int64_t)(rnd() % 2 ? 50 : 0);
		clock += (int64_t)(rnd() % 40);
		int64_t addr = 0x7f0000000000 + (int64_t)(rnd() % 64) * 16;
		int64_t size = 16 + (int64_t)(rnd() % 200);
		uint32_t heap = rnd() % 16 == 0 ? (uint32_t)(rnd() % 3) : 0;
		int64_t key = (int64_t)((rnd() % 3) << 32 | (rnd() % 500));
		int64_t charged = rnd() % 8 == 0 ? size * 3 : size;
		ev[n++] = (struct evc_event){ts, addr, size, charged, key,
		                             0,  tid,  heap, 0};
		if (n == N)
			break;
		struct evc_event f = ev[n - 1];
		f.free = 1;
		f.alloc_ts = f.ts;
		f.ts = ts + (int64_t)(rnd() % 30);
		f.tid = rnd() % 5 == 0 ? tid + 1 : tid;
		switch (rnd() % 8) {
		case 0: /* its allocation was before the chunk */
			f.alloc_ts = ts - 1000000;
			f.address += 8;
			break;
		case 1: /* no allocation time known */
			f.alloc_ts = 0;
			break;
		case 2: /* names the allocation, but its size differs */
			f.size++;
			break;
		case 3: /* another stack, another heap */
			f.stack_key ^= 1;
			f.heap ^= 1;
			break;
		case 4: /* a free of a free */
			f.free = 1;
			ev[n++] = f;
			if (n == N)
				break;
			break;
		default:
			break;
		}
		if (n < N)
			ev[n++] = f;
	}
	roundtrip(ev, N, 1);
	roundtrip(ev, 1, 1);
	roundtrip(ev + 1, 1, 1);
	roundtrip(ev, 777, 3);
}

/* The same address and time again and again; extreme values. */
static void test_extremes(void)
{
	static struct evc_event ev[64];
	size_t n = 0;
	for (int i = 0; i < 10; i++) {
		ev[n++] = (struct evc_event){5, 0x1000, 8, 8, 1, 0, 1, 0, 0};
		ev[n++] = (struct evc_event){5, 0x1000, 8, 8, 1, 5, 1, 0, 1};
	}
	const int64_t big[] = {INT64_MIN, INT64_MAX, -1, 0, 1};
	for (size_t i = 0; i < 5; i++)
		for (size_t j = 0; j < 5; j++)
			ev[n++] = (struct evc_event){
			        big[i],     big[j],     big[(i + j) % 5],
			        big[i],     big[j],     big[(i + 1) % 5],
			        UINT32_MAX, UINT32_MAX, (uint32_t)(j & 1)};
	/* A free whose alloc_ts is the allocation's ts 0 (NULL). */
	ev[n++] = (struct evc_event){0, 0x2000, 1, 1, 2, 0, 3, 0, 0};
	ev[n++] = (struct evc_event){1, 0x2000, 1, 1, 2, 0, 3, 0, 1};
	roundtrip(ev, n, 1);
}

static void test_refused(void)
{
	struct evc_event e = {1, 2, 3, 3, 4, 0, 5, 0, 0};
	const void *blob;
	size_t len;
	const struct evc_event *out;
	size_t m;
	CHECK(evc_encode(enc, &e, 0, 1, &blob, &len) == -EINVAL);
	CHECK(evc_encode(enc, &e, EVC_MAX_EVENTS + 1, 1, &blob, &len) ==
	      -EINVAL);
	CHECK(evc_decode(dec, "", 0, &out, &m) == -EINVAL);
	CHECK(evc_decode(dec, "\x01", 1, &out, &m) == -EINVAL);
	CHECK(evc_decode(dec, "\x02xxxxxxxx", 9, &out, &m) == -EINVAL);

	/* A real chunk, cut short and with bytes changed: refused or read
	 * whole, never past its end (run under ASan in `make asan`). */
	enum { N = 2000 };
	static struct evc_event ev[N];
	for (size_t i = 0; i < N; i++)
		ev[i] = (struct evc_event){(int64_t)(i * 10),
		                           0x1000 + 16 * (int64_t)(i % 50),
		                           16,
		                           16,
		                           (int64_t)(i % 7),
		                           0,
		                           1,
		                           0,
		                           0};
	CHECK(evc_encode(enc, ev, N, 1, &blob, &len) == 0);
	unsigned char *copy = malloc(len);
	CHECK(copy != NULL);
	if (!copy)
		return;
	int refused = 0;
	for (size_t cut = 0; cut < len; cut += 1 + cut / 8) {
		memcpy(copy, blob, len);
		refused += evc_decode(dec, copy, cut, &out, &m) == -EINVAL;
	}
	CHECK(refused > 0);
	for (int k = 0; k < 500; k++) {
		memcpy(copy, blob, len);
		copy[1 + rnd() % (len - 1)] ^= (unsigned char)(1 + rnd() % 255);
		int rc = evc_decode(dec, copy, len, &out, &m);
		CHECK(rc == 0 || rc == -EINVAL);
	}
	free(copy);
}

int main(void)
{
	static const struct unit_test tests[] = {
	        {"random", test_random},
	        {"program", test_program},
	        {"extremes", test_extremes},
	        {"refused", test_refused},
	        {NULL, NULL},
	};
	enc = evc_enc_new();
	dec = evc_dec_new();
	CHECK(enc && dec);
	int rc = unit_main("evchunk", tests);
	evc_enc_free(enc);
	evc_dec_free(dec);
	return rc;
}
