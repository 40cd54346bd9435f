/*
 * Reading a region.  The target may still be running (or may be hostile),
 * so every value read from shared memory is copied once and checked against
 * the geometry the collector itself planned; nothing is trusted twice.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/collector.h"

static uint64_t clamp(uint64_t v, uint64_t cap)
{
	return v < cap ? v : cap;
}

static int take_modules(const struct hp_region *r, struct snapshot *s)
{
	uint64_t n = clamp(atomic_load_explicit(&r->hdr->modules_used,
	                                        memory_order_acquire),
	                   r->modules_cap);
	uint64_t slen = clamp(atomic_load_explicit(&r->hdr->strings_used,
	                                           memory_order_acquire),
	                      r->strings_cap);
	s->modules = calloc(n ? n : 1, sizeof(*s->modules));
	s->build_ids = calloc(n ? n : 1, HP_BUILD_ID_MAX);
	s->strings = malloc(slen + 1);
	if (!s->modules || !s->build_ids || !s->strings)
		return -ENOMEM;
	memcpy(s->strings, r->strings, slen);
	s->strings[slen] = '\0';
	size_t k = 0;
	for (uint64_t i = 0; i < n; i++) {
		const struct hp_module_v1 *m = &r->modules[i];
		if (!atomic_load_explicit(&m->ready, memory_order_acquire))
			continue;
		struct prof_module *o = &s->modules[k];
		uint64_t po = m->path_off;
		o->path = po < slen ? s->strings + po : "";
		uint32_t bl = m->build_id_len;
		if (bl > HP_BUILD_ID_MAX)
			bl = HP_BUILD_ID_MAX;
		memcpy(s->build_ids + k * HP_BUILD_ID_MAX, m->build_id, bl);
		o->build_id = s->build_ids + k * HP_BUILD_ID_MAX;
		o->build_id_len = bl;
		o->start = m->start;
		o->end = m->end;
		o->base = m->base;
		o->load_bias = m->load_bias;
		o->exact_offset = m->exact_offset;
		if (o->end < o->start)
			o->end = o->start;
		k++;
	}
	s->dump.modules = s->modules;
	s->dump.nmodules = k;
	return 0;
}

static int take_stacks(const struct hp_region *r, struct snapshot *s)
{
	uint64_t n = clamp(atomic_load_explicit(&r->hdr->stacks_used,
	                                        memory_order_acquire),
	                   r->stacks_cap);
	uint64_t total = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t nf = r->stacks[i].nframes;
		total += nf < HP_MAX_FRAMES ? nf : HP_MAX_FRAMES;
	}
	s->stacks = calloc(n ? n : 1, sizeof(*s->stacks));
	s->pcs = calloc(total ? total : 1, sizeof(uint64_t));
	if (!s->stacks || !s->pcs)
		return -ENOMEM;
	size_t k = 0, used = 0;
	for (uint64_t i = 0; i < n; i++) {
		const struct hp_stack_v1 *st = &r->stacks[i];
		if (!atomic_load_explicit(&st->ready, memory_order_acquire))
			continue;
		struct prof_stack *o = &s->stacks[k];
		o->alloc_count = atomic_load_explicit(&st->alloc_count,
		                                      memory_order_relaxed);
		if (o->alloc_count == 0)
			continue; /* unused (e.g. lost an intern race) */
		o->alloc_bytes = atomic_load(&st->alloc_bytes);
		o->alloc_objects_fp = atomic_load(&st->alloc_objects_fp);
		o->free_count = atomic_load(&st->free_count);
		o->free_bytes = atomic_load(&st->free_bytes);
		o->free_objects_fp = atomic_load(&st->free_objects_fp);
		uint32_t nf = st->nframes;
		uint64_t off = st->frames_off;
		if (nf > HP_MAX_FRAMES || off > r->frames_cap ||
		    nf > r->frames_cap - off || used + nf > total)
			nf = 0; /* corrupt: keep the counters, drop frames */
		memcpy(s->pcs + used, r->frames + off, nf * sizeof(uint64_t));
		o->pcs = s->pcs + used;
		o->nframes = nf;
		used += nf;
		o->heap_id = st->heap_id < r->heaps_cap ? st->heap_id : 0;
		o->flags = i == 0 ? HP_STACK_OVERFLOW
		                  : (st->flags & HP_STACK_TRUNCATED);
		k++;
	}
	s->dump.stacks = s->stacks;
	s->dump.nstacks = k;
	return 0;
}

static int take_heaps(const struct hp_region *r, struct snapshot *s)
{
	uint64_t n = clamp(
	        atomic_load_explicit(&r->hdr->heaps_used, memory_order_acquire),
	        r->heaps_cap);
	s->heaps = calloc(n ? n : 1, sizeof(*s->heaps));
	s->heap_names = calloc(n ? n : 1, HP_HEAP_NAME_MAX);
	if (!s->heaps || !s->heap_names)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		const struct hp_heap_v1 *h = &r->heaps[i];
		memcpy(s->heap_names[i], h->name, HP_HEAP_NAME_MAX);
		s->heap_names[i][HP_HEAP_NAME_MAX - 1] = '\0';
		if (!atomic_load_explicit(&h->ready, memory_order_acquire))
			s->heap_names[i][0] = '\0';
		s->heaps[i].name = s->heap_names[i];
		s->heaps[i].interval = h->interval;
	}
	s->dump.heaps = s->heaps;
	s->dump.nheaps = n;
	return 0;
}

int snapshot_take(const struct hp_region *r, struct snapshot *s)
{
	memset(s, 0, sizeof(*s));
	const struct hp_header_v1 *h = r->hdr;
	for (int i = 0; i < HP_CTR_COUNT; i++)
		s->dump.counters[i] = atomic_load_explicit(
		        &((struct hp_header_v1 *)h)->counters[i],
		        memory_order_relaxed);
	s->dump.client_state =
	        atomic_load(&((struct hp_header_v1 *)h)->client_state);
	s->dump.stop_reason =
	        atomic_load(&((struct hp_header_v1 *)h)->stop_reason);
	int rc = take_modules(r, s);
	if (!rc)
		rc = take_stacks(r, s);
	if (!rc)
		rc = take_heaps(r, s);
	if (rc)
		snapshot_free(s);
	return rc;
}

void snapshot_free(struct snapshot *s)
{
	free(s->modules);
	free(s->stacks);
	free(s->heaps);
	free(s->pcs);
	free(s->strings);
	free(s->build_ids);
	free(s->heap_names);
	memset(s, 0, sizeof(*s));
}

/* The value in kB of "Key:   123 kB" in a /proc status text, in bytes. */
static int status_field(const char *text, const char *key, uint64_t *out)
{
	size_t klen = strlen(key);

	for (const char *l = text; l && *l;
	     l = strchr(l, '\n'), l = l ? l + 1 : l) {
		if (strncmp(l, key, klen) != 0 || l[klen] != ':')
			continue;
		char *end;
		unsigned long long kb = strtoull(l + klen + 1, &end, 10);
		if (end == l + klen + 1)
			return -1;
		*out = (uint64_t)kb * 1024;
		return 0;
	}
	return -1;
}

static int proc_memory(pid_t pid, struct prof_memory *m)
{
	char path[64], buf[4096];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* A zombie has no VmRSS: it is gone for our purpose. */
	if (status_field(buf, "VmRSS", &m->rss) < 0)
		return -1;
	m->have_rss = 1;
	m->rss_source = "proc";
	status_field(buf, "RssAnon", &m->rss_anon);
	status_field(buf, "RssFile", &m->rss_file);
	status_field(buf, "RssShmem", &m->rss_shmem);
	if (status_field(buf, "VmHWM", &m->rss_peak) == 0)
		m->have_peak = 1;
	return 0;
}

void snapshot_memory(const struct hp_region *r, pid_t pid, bool alive,
                     struct prof_memory *out)
{
	struct hp_memstat_v1 *ms = &r->hdr->memstat;
	struct prof_memory c = {0};

	memset(out, 0, sizeof(*out));
	if (alive && pid > 0)
		proc_memory(pid, out);
	/* The client's reading at exit, if it finished writing one. */
	for (int tries = 0; tries < 4; tries++) {
		uint64_t s1 =
		        atomic_load_explicit(&ms->seq, memory_order_acquire);
		if (s1 & 1)
			continue;
		uint64_t ts =
		        atomic_load_explicit(&ms->ts_ns, memory_order_relaxed);
		uint64_t flags =
		        atomic_load_explicit(&ms->flags, memory_order_relaxed);
		c.rss = atomic_load_explicit(&ms->rss, memory_order_relaxed);
		c.rss_anon = atomic_load_explicit(&ms->rss_anon,
		                                  memory_order_relaxed);
		c.malloc_system = atomic_load_explicit(&ms->malloc_system,
		                                       memory_order_relaxed);
		c.malloc_in_use = atomic_load_explicit(&ms->malloc_in_use,
		                                       memory_order_relaxed);
		c.malloc_free = atomic_load_explicit(&ms->malloc_free,
		                                     memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&ms->seq, memory_order_relaxed) != s1)
			continue;
		if (!ts)
			break;
		if (!out->have_rss && (flags & HP_MEMSTAT_RSS)) {
			out->have_rss = 1;
			out->rss_source = "exit";
			out->rss = c.rss;
			out->rss_anon = c.rss_anon;
		}
		if (flags & HP_MEMSTAT_MALLOC) {
			out->have_malloc = 1;
			out->malloc_system = c.malloc_system;
			out->malloc_in_use = c.malloc_in_use;
			out->malloc_free = c.malloc_free;
		}
		break;
	}
}
