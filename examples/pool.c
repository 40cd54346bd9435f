/*
 * A fixed-size object pool, instrumented with heapprof's custom allocator
 * API, to show a custom heap next to libc.malloc in a profile.
 *
 * Each pool carves objects of one size out of 16 KiB chunks it mallocs,
 * and keeps freed objects on a free list.  To malloc (and so to a heap
 * profiler that only sees malloc) the program holds a few 16 KiB chunks
 * allocated in pool_grow; the pool's own heap, "example.pool", shows which
 * functions asked for the objects inside them and how many are still in
 * use.
 *
 *     heapprof record -i 1 --all-heaps -- build/examples/pool
 *     heapprof report heapprof.pool.<pid>.db
 *
 * What it does (exact counts, used by tests/integration/test_heaps.sh):
 *   load_nodes     1000 objects of 48 bytes from the node pool, kept
 *   parse_tokens    500 objects of 32 bytes from the token pool, 250 freed
 *   make_names      200 malloc'd blocks of 100 bytes, kept
 *   pool_grow         4 malloc'd chunks of 16384 bytes (3 node, 1 token)
 */
#include <heapprof/heap_profile.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE 16384
#define MAX_CHUNKS 64

struct pool {
	size_t obj_size;
	char *chunk;       /* current chunk */
	size_t chunk_left; /* bytes not carved yet */
	void *free_list;   /* freed objects, linked through their 1st word */
	void *chunks[MAX_CHUNKS]; /* every chunk, to give back at the end */
	size_t nchunks;
};

/* One heap for all pools of the program, registered once. */
static uint32_t pool_heap;

static void pool_init(struct pool *p, size_t obj_size)
{
	if (!pool_heap)
		pool_heap = AHeapProfile_registerHeap(
		        AHeapInfo_create("example.pool"));
	memset(p, 0, sizeof(*p));
	p->obj_size = obj_size < sizeof(void *) ? sizeof(void *) : obj_size;
}

static int pool_grow(struct pool *p)
{
	if (p->nchunks == MAX_CHUNKS)
		return -1;
	char *c = malloc(CHUNK_SIZE);
	if (!c)
		return -1;
	p->chunks[p->nchunks++] = c;
	p->chunk = c;
	p->chunk_left = CHUNK_SIZE;
	return 0;
}

static void *pool_alloc(struct pool *p)
{
	void *obj;
	if (p->free_list) {
		obj = p->free_list;
		p->free_list = *(void **)obj;
	} else {
		if (p->chunk_left < p->obj_size && pool_grow(p) != 0)
			return NULL;
		obj = p->chunk + (CHUNK_SIZE - p->chunk_left);
		p->chunk_left -= p->obj_size;
	}
	AHeapProfile_reportAllocation(pool_heap, (uintptr_t)obj, p->obj_size);
	return obj;
}

static void pool_free(struct pool *p, void *obj)
{
	if (!obj)
		return;
	AHeapProfile_reportFree(pool_heap, (uintptr_t)obj);
	*(void **)obj = p->free_list;
	p->free_list = obj;
}

/* ---- a program using it ------------------------------------------------- */

struct node {
	struct node *next;
	char payload[40];
};

static struct node *load_nodes(struct pool *nodes, int n)
{
	struct node *head = NULL;
	for (int i = 0; i < n; i++) {
		struct node *x = pool_alloc(nodes);
		if (!x)
			break;
		x->next = head;
		snprintf(x->payload, sizeof(x->payload), "node %d", i);
		head = x;
	}
	return head;
}

static int parse_tokens(struct pool *tokens, int n)
{
	void *kept[500];
	int k = 0;
	for (int i = 0; i < n; i++) {
		char *t = pool_alloc(tokens);
		if (!t)
			break;
		snprintf(t, 32, "token-%d", i);
		if (i % 2)
			pool_free(tokens, t); /* a temporary */
		else if (k < 500)
			kept[k++] = t;
	}
	return k;
}

static char *names[200];

static int make_names(int n)
{
	int made = 0;
	for (int i = 0; i < n && i < 200; i++) {
		names[i] = malloc(100);
		if (names[i]) {
			snprintf(names[i], 100, "name %d", i);
			made++;
		}
	}
	return made;
}

int main(void)
{
	struct pool nodes, tokens;
	pool_init(&nodes, sizeof(struct node));
	pool_init(&tokens, 32);
	struct node *list = load_nodes(&nodes, 1000);
	int kept = parse_tokens(&tokens, 500);
	int made = make_names(200);
	size_t count = 0;
	for (struct node *x = list; x; x = x->next)
		count++;
	/* Everything stays allocated: a profile taken at exit shows it. */
	printf("pool: %zu nodes, %d tokens kept, %zu+%zu chunks, %d names\n",
	       count, kept, nodes.nchunks, tokens.nchunks, made);
	return 0;
}
