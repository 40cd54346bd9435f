/*
 * Unit tests of the collector's client side (collector.c, snapshot.c): a
 * client on a socketpair asks for more room (HP_CMSG_GROW), gets regions
 * of twice the size until the budget is spent, and every dump reads all of
 * its regions as one process, with a stack's identity stable across
 * regions and dumps.  Partial messages are put together; garbage stops the
 * collector reading the client but keeps its data.
 */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "store/trace_read.h"
#include "collector/collector.h"
#include "unit.h"

#define MIB (1ull << 20)

struct client_end {
	int fd;
	struct hp_region r[TARGET_MAX_REGIONS];
	int n;
};

/* The client's side of a welcome: status, and the region mapped. */
static int recv_region(struct client_end *ce, uint32_t *status)
{
	struct hp_welcome w;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &w, .iov_len = sizeof(w)};
	struct msghdr msg = {.msg_iov = &iov,
	                     .msg_iovlen = 1,
	                     .msg_control = cbuf,
	                     .msg_controllen = sizeof(cbuf)};
	ssize_t n = recvmsg(ce->fd, &msg, MSG_DONTWAIT);
	if (n != (ssize_t)sizeof(w))
		return -1;
	*status = w.status;
	int rfd = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c;
	     c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_type == SCM_RIGHTS)
			memcpy(&rfd, CMSG_DATA(c), sizeof(int));
	if (w.status != HP_WELCOME_ACCEPT)
		return rfd < 0 ? 0 : -1;
	if (rfd < 0)
		return -1;
	void *base = mmap(NULL, w.region_size, PROT_READ | PROT_WRITE,
	                  MAP_SHARED, rfd, 0);
	close(rfd);
	if (base == MAP_FAILED ||
	    region_bind(&ce->r[ce->n], base, w.region_size) != 0)
		return -1;
	ce->n++;
	return 0;
}

static void send_msg(int fd, uint32_t magic, uint32_t type, size_t len)
{
	struct hp_client_msg m = {.magic = magic, .type = type, .arg = 1};
	CHECK(send(fd, &m, len, 0) == (ssize_t)len);
}

/* Adds one sampled allocation of `bytes` to the stack `pcs` in r. */
static void sample(struct hp_region *r, const uint64_t *pcs, uint32_t n,
                   uint64_t bytes)
{
	bool is_new;
	uint32_t id = stacktab_intern(r, 0, pcs, n, 0, &is_new);
	CHECK(id != 0);
	struct hp_stack_v1 *s = &r->stacks[id];
	atomic_fetch_add(&s->alloc_count, 1);
	atomic_fetch_add(&s->alloc_bytes, bytes);
	atomic_fetch_add(&s->alloc_objects_fp, HP_OBJ_FP_ONE);
}

static void add_module(struct hp_region *r)
{
	uint64_t i = atomic_fetch_add(&r->hdr->modules_used, 1);
	struct hp_module_v1 *m = &r->modules[i];
	m->path_off = strtab_append(r, "/bin/x", 6);
	m->start = 0x1000;
	m->end = 0x9000;
	m->base = 0x1000;
	atomic_store(&m->ready, 1);
}

static long long q1(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	long long v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -2;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static void test_grow_and_dump(void)
{
	char dir[] = "/tmp/hp-collector-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[128];
	snprintf(path, sizeof(path), "%s/p.db", dir);

	struct collector c;
	struct collector_opts o = {.interval = 4096,
	                           .unwind_mode = HP_UNWIND_DWARF,
	                           .max_frames = 64,
	                           .shmem_size = MIB,
	                           .config_flags = HP_CFG_BLOCK_CLIENT,
	                           .block_timeout_ms = 100};
	CHECK(collector_open(&c, &o, false) == 0);
	c.profile = profile_create(path, "test");
	CHECK(c.profile != NULL);

	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	struct client_end ce = {.fd = sv[1]};
	struct target_info ti = {.pid = getpid(),
	                         .how = "pid",
	                         .name = "unit",
	                         .cmdline = "unit test"};
	struct target *t = NULL;
	CHECK(collector_answer(&c, sv[0], &ti, &t) == 0);
	CHECK(t != NULL);
	uint32_t st = 99;
	CHECK(recv_region(&ce, &st) == 0);
	CHECK_EQ_U64(st, HP_WELCOME_ACCEPT);
	CHECK_EQ_U64(ce.r[0].size, MIB);
	CHECK_EQ_U64(ce.r[0].hdr->config_flags, HP_CFG_BLOCK_CLIENT);
	CHECK_EQ_U64(ce.r[0].hdr->block_timeout_ms, 100);

	const uint64_t a[] = {0x1100, 0x1200, 0x1300};
	const uint64_t b[] = {0x1400, 0x1200, 0x1300};
	sample(&ce.r[0], a, 3, 100);
	sample(&ce.r[0], a, 3, 100);
	add_module(&ce.r[0]);
	atomic_store(&ce.r[0].hdr->counters[HP_CTR_LIVE_FULL], 2);

	/* GROW, sent in two halves: one message. */
	send_msg(sv[1], HP_WIRE_MAGIC, HP_CMSG_GROW, 8);
	collector_poll_client(&c, t);
	CHECK_EQ_U64(t->nreg, 1);
	struct hp_client_msg m = {.magic = HP_WIRE_MAGIC, .type = HP_CMSG_GROW};
	CHECK(send(sv[1], (char *)&m + 8, 8, 0) == 8);
	collector_poll_client(&c, t);
	CHECK_EQ_U64(t->nreg, 2);
	CHECK(recv_region(&ce, &st) == 0);
	CHECK_EQ_U64(st, HP_WELCOME_ACCEPT);
	CHECK_EQ_U64(ce.r[1].size, 2 * MIB);

	/* The same stack in the new region, and a new one. */
	sample(&ce.r[1], a, 3, 100);
	sample(&ce.r[1], b, 3, 7);
	add_module(&ce.r[1]);
	atomic_store(&ce.r[1].hdr->counters[HP_CTR_LIVE_FULL], 3);

	const struct hp_region *regs[] = {&t->reg[0].region, &t->reg[1].region};
	struct snapshot s;
	CHECK(snapshot_take_regions(regs, 2, false, &s) == 0);
	CHECK_EQ_U64(s.dump.nstacks, 3);
	CHECK_EQ_U64(s.dump.nmodules, 1); /* the same mapping twice */
	CHECK_EQ_U64(s.dump.counters[HP_CTR_LIVE_FULL], 5);
	CHECK_EQ_U64(s.dump.at_max, 0);
	snapshot_free(&s);

	CHECK(collector_dump(&c, t, "one", 1000) == 0);
	sample(&ce.r[0], a, 3, 100); /* the old region still counts */
	CHECK(collector_dump(&c, t, "two", 2000) == 0);

	/* Budget: 1 + 2 + 4 MiB fit in 8 x 1 MiB, 8 more do not. */
	send_msg(sv[1], HP_WIRE_MAGIC, HP_CMSG_GROW, sizeof(m));
	collector_poll_client(&c, t);
	CHECK(recv_region(&ce, &st) == 0);
	CHECK_EQ_U64(st, HP_WELCOME_ACCEPT);
	CHECK_EQ_U64(ce.r[2].size, 4 * MIB);
	send_msg(sv[1], HP_WIRE_MAGIC, HP_CMSG_GROW, sizeof(m));
	collector_poll_client(&c, t);
	CHECK(recv_region(&ce, &st) == 0);
	CHECK_EQ_U64(st, HP_WELCOME_ERROR);
	CHECK_EQ_U64(t->nreg, 3);
	CHECK_EQ_U64(t->shmem_total, 7 * MIB);

	/* Garbage: no answer, no new region, the data stays; EOF still
	 * ends the connection. */
	send_msg(sv[1], 0xdeadbeef, HP_CMSG_GROW, sizeof(m));
	collector_poll_client(&c, t);
	CHECK(t->proto_error);
	send_msg(sv[1], HP_WIRE_MAGIC, HP_CMSG_GROW, sizeof(m));
	collector_poll_client(&c, t);
	CHECK(recv_region(&ce, &st) == -1); /* nothing to read */
	CHECK_EQ_U64(t->nreg, 3);
	CHECK(!t->disconnected);
	close(sv[1]);
	collector_poll_client(&c, t);
	CHECK(t->disconnected);
	CHECK(collector_dump(&c, t, "three", 3000) == 0);
	CHECK(collector_end_row(&c, t, 4000, -1, true) == 0);
	CHECK(profile_close(c.profile) == 0);
	c.profile = NULL;

	sqlite3 *db;
	CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) ==
	      SQLITE_OK);
	/* Stack a in two regions is one callsite: 3 allocations at the
	 * first dump, one more at the second; b once. */
	CHECK_EQ_U64(q1(db, "SELECT sum(count) FROM heap_profile_allocation"
	                    " WHERE ts = 1000"),
	             4);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heap_profile_allocation"
	                    " WHERE ts = 1000"),
	             2);
	CHECK_EQ_U64(q1(db, "SELECT count(*) || size FROM "
	                    "heap_profile_allocation WHERE ts = 2000"),
	             1100);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heap_profile_allocation"
	                    " WHERE ts = 3000"),
	             0);
	CHECK_EQ_U64(q1(db, "SELECT count(DISTINCT callsite_id) FROM "
	                    "heap_profile_allocation"),
	             2);
	CHECK_EQ_U64(q1(db, "SELECT value FROM heapprof_process_stats"
	                    " WHERE name = 'live_table_full'"),
	             5);
	CHECK_EQ_U64(q1(db, "SELECT disconnected FROM heapprof_process"), 1);
	sqlite3_close(db);

	for (int i = 0; i < ce.n; i++)
		munmap(ce.r[i].base, ce.r[i].size);
	collector_close(&c);
	unlink(path);
	char side[160];
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
	rmdir(dir);
}

/* An allocation of `bytes` to stack id, as the peak protocol wants it: the
 * copy first, then the counters, then live_bytes with the time given. */
static void peak_alloc(struct hp_region *r, uint32_t id, uint64_t bytes,
                       uint64_t ts)
{
	stackmax_touch(r, id);
	atomic_fetch_add(&r->stacks[id].alloc_count, 1);
	atomic_fetch_add(&r->stacks[id].alloc_bytes, bytes);
	atomic_fetch_add(&r->stacks[id].alloc_objects_fp, HP_OBJ_FP_ONE);
	stackmax_alloc_at(r, bytes, ts);
}

/* --dump-at-max: regions carry a STACK_MAX table and dumps say so. */
static void test_at_max(void)
{
	struct collector c;
	struct collector_opts o = {.interval = 1,
	                           .unwind_mode = HP_UNWIND_DWARF,
	                           .max_frames = 64,
	                           .shmem_size = 4 * MIB,
	                           .config_flags = HP_CFG_TRACK_MAX};
	CHECK(collector_open(&c, &o, false) == 0);
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	struct target *t = NULL;
	struct target_info ti = {.pid = getpid(), .name = "u", .cmdline = "u"};
	char dir[] = "/tmp/hp-collector-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[128], side[160];
	snprintf(path, sizeof(path), "%s/m.db", dir);
	c.profile = profile_create(path, "t");
	CHECK(collector_answer(&c, sv[0], &ti, &t) == 0);
	struct client_end ce = {.fd = sv[1]};
	uint32_t st;
	CHECK(recv_region(&ce, &st) == 0);
	struct hp_region *r = &ce.r[0];
	CHECK(r->stack_max != NULL);
	const uint64_t a[] = {0x10, 0x20};
	bool is_new;
	uint32_t id = stacktab_intern(r, 0, a, 2, 0, &is_new);
	/* Two allocations of 500 (the peak, 1000), then one freed. */
	for (int i = 0; i < 2; i++)
		peak_alloc(r, id, 500, hp_clock_ns(CLOCK_BOOTTIME));
	stackmax_touch(r, id);
	atomic_fetch_add(&r->stacks[id].free_count, 1);
	atomic_fetch_add(&r->stacks[id].free_bytes, 500);
	stackmax_free(r, 500);

	const struct hp_region *regs[] = {&t->reg[0].region};
	struct snapshot s;
	CHECK(snapshot_take_regions(regs, 1, true, &s) == 0);
	CHECK_EQ_U64(s.dump.at_max, 1);
	CHECK_EQ_U64(s.dump.max_live_bytes, 1000);
	CHECK(s.dump.max_ts_ns != 0);
	CHECK_EQ_U64(s.dump.nstacks, 1);
	CHECK_EQ_U64(s.dump.stacks[0].alloc_count, 2);
	CHECK_EQ_U64(s.dump.stacks[0].free_count, 0); /* at the peak */
	snapshot_free(&s);
	/* The same regions read now: the free is in, the peak still said. */
	CHECK(snapshot_take_regions(regs, 1, false, &s) == 0);
	CHECK_EQ_U64(s.dump.at_max, 0);
	CHECK_EQ_U64(s.dump.max_live_bytes, 1000);
	CHECK_EQ_U64(s.dump.stacks[0].alloc_count, 2);
	CHECK_EQ_U64(s.dump.stacks[0].free_count, 1);
	snapshot_free(&s);
	close(sv[1]);
	for (int i = 0; i < ce.n; i++)
		munmap(ce.r[i].base, ce.r[i].size);
	profile_close(c.profile);
	c.profile = NULL;
	collector_close(&c);
	unlink(path);
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
	rmdir(dir);
}

static uint32_t want_all(void *ctx, pid_t pid, const struct hp_hello *h,
                         struct target_info *ti)
{
	(*(int *)ctx)++;
	ti->how = "command";
	ti->name = "u";
	ti->cmdline = "u";
	return HP_WELCOME_NOT_TARGET;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* One round of the session's loop over the collector, without waiting. */
static void one_round(struct collector *c, int *asked)
{
	struct pollfd fds[8 + COLLECTOR_MAX_PENDING];
	size_t n = collector_pollfds(c, fds, 8 + COLLECTOR_MAX_PENDING);
	CHECK(poll(fds, n, 100) >= 0);
	collector_handle(c, fds, n, want_all, asked);
}

/* A client that connects and says nothing, or half a hello, or garbage,
 * never makes the loop wait; a silent one is dropped at its deadline. */
static void test_pending_hellos(void)
{
	struct collector c;
	struct collector_opts o = {.interval = 4096, .max_frames = 64};
	CHECK(collector_open(&c, &o, true) == 0);
	int asked = 0;
	int silent = connect_to(c.path);
	int half = connect_to(c.path);
	int junk = connect_to(c.path);
	CHECK(silent >= 0 && half >= 0 && junk >= 0);
	struct hp_hello h = {.magic = HP_WIRE_MAGIC,
	                     .version = HP_WIRE_VERSION,
	                     .layout_version = HP_LAYOUT_VERSION,
	                     .flags = HP_HELLO_AT_STARTUP};
	CHECK(send(half, &h, 20, 0) == 20);
	struct hp_hello bad = h;
	bad.magic = 0x12345678;
	CHECK(send(junk, &bad, sizeof(bad), 0) == sizeof(bad));
	for (int i = 0; i < 4; i++)
		one_round(&c, &asked);
	/* The junk hello was closed without a question; two wait. */
	CHECK_EQ_U64(c.npending, 2);
	CHECK_EQ_U64(asked, 0);
	char b;
	CHECK(recv(junk, &b, 1, 0) == 0); /* closed, no welcome */
	CHECK(collector_timeout_ms(&c) > 0);
	CHECK(collector_timeout_ms(&c) <= COLLECTOR_HELLO_MS);
	/* The rest of the hello: answered (NOT_TARGET from want_all). */
	CHECK(send(half, (char *)&h + 20, sizeof(h) - 20, 0) ==
	      (ssize_t)(sizeof(h) - 20));
	one_round(&c, &asked);
	CHECK_EQ_U64(asked, 1);
	CHECK_EQ_U64(c.npending, 1);
	struct hp_welcome w;
	CHECK(recv(half, &w, sizeof(w), 0) == sizeof(w));
	CHECK_EQ_U64(w.status, HP_WELCOME_NOT_TARGET);
	/* The silent one at its deadline. */
	c.pending[0].deadline_ns = 0;
	collector_expire(&c);
	CHECK_EQ_U64(c.npending, 0);
	CHECK(recv(silent, &b, 1, 0) == 0);
	CHECK_EQ_U64(collector_timeout_ms(&c), (uint64_t)-1);
	close(silent);
	close(half);
	close(junk);
	collector_close(&c);
}

/* ---- layout versions, the trace, named snapshots --------------------- */

/* A collector with its profile in a scratch dir (unit_db_cleanup). */
struct unit_db {
	char dir[32];
	char path[128];
};

static void unit_db_open(struct unit_db *u, struct collector *c,
                         const struct collector_opts *o)
{
	snprintf(u->dir, sizeof(u->dir), "/tmp/hp-coll-XXXXXX");
	CHECK(mkdtemp(u->dir) != NULL);
	snprintf(u->path, sizeof(u->path), "%s/p.db", u->dir);
	CHECK(collector_open(c, o, false) == 0);
	c->profile = profile_create(u->path, "test");
	CHECK(c->profile != NULL);
}

static sqlite3 *unit_db_close(struct unit_db *u, struct collector *c)
{
	CHECK(profile_close(c->profile) == 0);
	c->profile = NULL;
	sqlite3 *db = NULL;
	CHECK(sqlite3_open_v2(u->path, &db, SQLITE_OPEN_READONLY, NULL) ==
	      SQLITE_OK);
	return db;
}

static void unit_db_cleanup(struct unit_db *u, sqlite3 *db)
{
	sqlite3_close(db);
	char side[160];
	unlink(u->path);
	snprintf(side, sizeof(side), "%s-wal", u->path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", u->path);
	unlink(side);
	rmdir(u->dir);
}

/* A client with layout version lv attached on a socketpair. */
static struct target *attach(struct collector *c, struct client_end *ce,
                             uint32_t lv)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	memset(ce, 0, sizeof(*ce));
	ce->fd = sv[1];
	struct target_info ti = {.pid = getpid(),
	                         .how = "pid",
	                         .name = "unit",
	                         .cmdline = "unit",
	                         .layout_version = lv};
	struct target *t = NULL;
	CHECK(collector_answer(c, sv[0], &ti, &t) == 0);
	uint32_t st = 99;
	CHECK(recv_region(ce, &st) == 0);
	CHECK_EQ_U64(st, HP_WELCOME_ACCEPT);
	return t;
}

static void detach(struct client_end *ce)
{
	close(ce->fd);
	for (int i = 0; i < ce->n; i++)
		munmap(ce->r[i].base, ce->r[i].size);
}

/* A stack with one allocation of `bytes` counted; its id. */
static uint32_t stack_with(struct hp_region *r, uint64_t leaf, uint64_t bytes)
{
	const uint64_t pcs[] = {leaf, 0x1200, 0x1300};
	bool is_new;
	uint32_t id = stacktab_intern(r, 0, pcs, 3, 0, &is_new);
	CHECK(id != 0);
	atomic_fetch_add(&r->stacks[id].alloc_count, 1);
	atomic_fetch_add(&r->stacks[id].alloc_bytes, bytes);
	atomic_fetch_add(&r->stacks[id].alloc_objects_fp, HP_OBJ_FP_ONE);
	return id;
}

static int put_event(struct hp_region *r, uint32_t stack, uint64_t i)
{
	struct hp_event_v2 ev = {.ts_ns = 1000 + i,
	                         .addr = 0x100000 + 16 * i,
	                         .size = 1 + i,
	                         .charged = 1 + i,
	                         .stack_id = stack,
	                         .tid = 42,
	                         .kind = i % 3 == 2 ? HP_EV_FREE : HP_EV_ALLOC,
	                         .region = 0};
	return trace_put(r, &ev);
}

/* A v1 hello gets a v1 region (no trace, even when the session traces);
 * its GROW regions are v1 too.  Ours gets v2. */
static void test_v1_hello(void)
{
	struct collector c;
	struct collector_opts o = {.interval = 4096,
	                           .max_frames = 64,
	                           .shmem_size = MIB,
	                           .config_flags = HP_CFG_BLOCK_CLIENT,
	                           .block_timeout_ms = 10,
	                           .trace_mode = HP_TRACE_STREAMING,
	                           .trace_bytes = 64 << 10};
	struct unit_db u;
	unit_db_open(&u, &c, &o);
	struct client_end ce;
	struct target *t = attach(&c, &ce, 1);
	CHECK_EQ_U64(ce.r[0].version, 1);
	CHECK(ce.r[0].ext == NULL);
	CHECK_EQ_U64(ce.r[0].trace_cap, 0);
	CHECK_EQ_U64(ce.r[0].size, MIB);
	CHECK_EQ_U64(t->layout_version, 1);
	CHECK_EQ_U64(t->tr.mode, HP_TRACE_OFF);
	send_msg(ce.fd, HP_WIRE_MAGIC, HP_CMSG_GROW, 16);
	collector_poll_client(&c, t);
	uint32_t st = 99;
	CHECK(recv_region(&ce, &st) == 0);
	CHECK_EQ_U64(ce.r[1].version, 1);
	CHECK_EQ_U64(ce.r[1].size, 2 * MIB);
	stack_with(&ce.r[0], 0x1100, 64);
	CHECK(collector_dump_final(&c, t, "end", 10) == 0);
	detach(&ce);

	struct client_end ce2;
	struct target *t2 = attach(&c, &ce2, 7); /* a newer client: ours */
	CHECK_EQ_U64(ce2.r[0].version, HP_LAYOUT_VERSION);
	CHECK_EQ_U64(t2->tr.mode, HP_TRACE_STREAMING);
	detach(&ce2);
	sqlite3 *db = unit_db_close(&u, &c);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_trace"), 0);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_block"), 0);
	collector_close(&c);
	unit_db_cleanup(&u, db);
}

/*
 * Streaming: region 0 is the tables plus the trace (and has the table),
 * a GROW region has no trace and doubles the tables only.  Events are read
 * in order, the room given back; at the end a position a writer reserved
 * and never finished is skipped and counted.  The last dump maps every
 * stack key and holds the live blocks.
 */
static void test_trace_streaming(void)
{
	struct collector c;
	struct collector_opts o = {.interval = 1,
	                           .max_frames = 64,
	                           .shmem_size = MIB,
	                           .config_flags = HP_CFG_BLOCK_CLIENT,
	                           .block_timeout_ms = 10,
	                           .trace_mode = HP_TRACE_STREAMING,
	                           .trace_bytes = 64 << 10};
	struct unit_db u;
	unit_db_open(&u, &c, &o);
	struct client_end ce;
	struct target *t = attach(&c, &ce, HP_LAYOUT_VERSION);
	struct hp_region *r = &ce.r[0];
	CHECK_EQ_U64(r->size, MIB + (64 << 10));
	CHECK_EQ_U64(r->trace_cap, 1024);
	CHECK_EQ_U64(r->trace_mode, HP_TRACE_STREAMING);
	CHECK_EQ_U64(r->ext->region_index, 0);
	CHECK_EQ_U64(t->tr.cap, 1024);
	CHECK_EQ_U64(t->tr.bytes, 64 << 10);
	send_msg(ce.fd, HP_WIRE_MAGIC, HP_CMSG_GROW, 16);
	collector_poll_client(&c, t);
	uint32_t st = 99;
	CHECK(recv_region(&ce, &st) == 0);
	CHECK_EQ_U64(ce.r[1].size, 2 * MIB);
	CHECK_EQ_U64(ce.r[1].trace_cap, 0);
	CHECK_EQ_U64(ce.r[1].ext->region_index, 1);
	r = &ce.r[0];

	uint32_t a = stack_with(r, 0x1100, 10);
	uint32_t b = stack_with(&ce.r[1], 0x1400, 20);
	/* Fill the buffer: the next one finds no room until we read. */
	for (uint64_t i = 0; i < 1024; i++)
		CHECK(put_event(r, a, i) == 0);
	CHECK(put_event(r, a, 1024) == -EAGAIN);
	CHECK_EQ_U64(collector_trace_poll(&c, t), 0);
	CHECK_EQ_U64(t->tr.events, 1024);
	CHECK_EQ_U64(atomic_load(&r->ext->trace_tail), 1024);
	struct hp_event_v2 ev = {.ts_ns = 5000,
	                         .size = 7,
	                         .stack_id = b,
	                         .kind = HP_EV_ALLOC,
	                         .region = 1};
	CHECK(trace_put(r, &ev) == 0);
	/* A writer that reserved position 1026 and died; one more after. */
	atomic_fetch_add(&r->ext->trace_head, 1);
	CHECK(put_event(r, a, 2000) == 0);
	CHECK_EQ_U64(collector_trace_poll(&c, t), 2); /* stops at 1026 */
	CHECK_EQ_U64(t->tr.events, 1025);
	struct hp_live_v2 v = {.stack_id = a,
	                       .size = 10,
	                       .charged = 10,
	                       .tid = 42,
	                       .ts_ns = 99};
	CHECK(livetab_insert(r, 0xabc0, &v) == 0);
	close(ce.fd); /* the program is gone */
	ce.fd = -1;
	collector_poll_client(&c, t);
	CHECK(t->disconnected);
	CHECK(collector_dump_final(&c, t, "end", 10) == 0);
	CHECK_EQ_U64(t->tr.events, 1026);
	CHECK_EQ_U64(t->tr.incomplete, 1);
	struct prof_trace pt;
	collector_trace_stats(t, &pt);
	CHECK_EQ_U64(pt.dropped_allocs + pt.dropped_frees, 0);
	CHECK(!strcmp(pt.mode, "streaming"));
	CHECK_EQ_U64(pt.buffer_bytes, 64 << 10);
	for (int i = 0; i < ce.n; i++)
		munmap(ce.r[i].base, ce.r[i].size);
	sqlite3 *db = unit_db_close(&u, &c);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_event"), 1026);
	/* In order, and every event's stack resolves. */
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_event_callsite"
	                    " WHERE callsite_id IS NULL"),
	             0);
	CHECK_EQ_U64(q1(db, "SELECT max(ts) FROM heapprof_event"
	                    " WHERE rowid = 1025"),
	             5000);
	CHECK_EQ_U64(q1(db, "SELECT stack_key FROM heapprof_event"
	                    " WHERE ts = 5000"),
	             (1ull << 32) | b);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_event WHERE"
	                    " kind = 'free'"),
	             1024 / 3 + 1); /* i % 3 == 2 below 1024, and 2000 */
	CHECK_EQ_U64(q1(db, "SELECT events || incomplete FROM heapprof_trace"),
	             10261);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_block"), 1);
	CHECK_EQ_U64(q1(db, "SELECT tid FROM heapprof_block"), 42);
	collector_close(&c);
	unit_db_cleanup(&u, db);
}

/* Oneshot keeps the first capacity events and says once it is full; a
 * ring keeps the newest and counts what it overwrote. */
static void test_trace_oneshot_ring(void)
{
	for (int mode = HP_TRACE_ONESHOT; mode <= HP_TRACE_RING; mode++) {
		struct collector c;
		struct collector_opts o = {.interval = 1,
		                           .max_frames = 64,
		                           .shmem_size = MIB,
		                           .trace_mode = (uint32_t)mode,
		                           .trace_bytes = 64 << 10};
		struct unit_db u;
		unit_db_open(&u, &c, &o);
		struct client_end ce;
		struct target *t = attach(&c, &ce, HP_LAYOUT_VERSION);
		struct hp_region *r = &ce.r[0];
		uint32_t a = stack_with(r, 0x1100, 10);
		uint64_t full_ts = 0;
		CHECK(!collector_trace_full(t, &full_ts));
		for (uint64_t i = 0; i < 1024 + 100; i++)
			put_event(r, a, i);
		if (mode == HP_TRACE_ONESHOT) {
			CHECK(collector_trace_full(t, &full_ts));
			CHECK(full_ts != 0);
			CHECK(!collector_trace_full(t, &full_ts));
			/* A dump reads what it holds so far. */
			CHECK(collector_dump(&c, t, "periodic", 5) == 0);
			CHECK_EQ_U64(t->tr.events, 1024);
		} else {
			CHECK(!collector_trace_full(t, &full_ts));
		}
		close(ce.fd);
		ce.fd = -1;
		collector_poll_client(&c, t);
		CHECK(collector_dump_final(&c, t, "end", 10) == 0);
		struct prof_trace pt;
		collector_trace_stats(t, &pt);
		CHECK_EQ_U64(pt.events, 1024);
		if (mode == HP_TRACE_ONESHOT) {
			CHECK_EQ_U64(pt.dropped_allocs + pt.dropped_frees, 100);
			CHECK_EQ_U64(pt.overwritten, 0);
			CHECK(pt.full_ts_ns == full_ts);
		} else {
			CHECK_EQ_U64(pt.dropped_allocs + pt.dropped_frees, 0);
			CHECK_EQ_U64(pt.overwritten, 100);
		}
		detach(&ce);
		sqlite3 *db = unit_db_close(&u, &c);
		/* Oneshot: events 0..1023; ring: 100..1123. */
		uint64_t first = mode == HP_TRACE_ONESHOT ? 1000 : 1100;
		CHECK_EQ_U64(q1(db, "SELECT min(ts) FROM heapprof_event"),
		             first);
		CHECK_EQ_U64(q1(db, "SELECT max(ts) FROM heapprof_event"),
		             first + 1023);
		CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_event"),
		             1024);
		CHECK_EQ_U64(q1(db, "SELECT count(*) FROM"
		                    " heapprof_event_callsite"
		                    " WHERE callsite_id IS NULL"),
		             0);
		collector_close(&c);
		unit_db_cleanup(&u, db);
	}
}

/* HP_CMSG_SNAPSHOT: the message and its name in pieces, answered with a
 * welcome without fd once the named dump with every block is written; a
 * bad length is a protocol error. */
static void test_snapshot_msg(void)
{
	struct collector c;
	struct collector_opts o = {
	        .interval = 1, .max_frames = 64, .shmem_size = MIB};
	struct unit_db u;
	unit_db_open(&u, &c, &o);
	struct client_end ce;
	struct target *t = attach(&c, &ce, HP_LAYOUT_VERSION);
	struct hp_region *r = &ce.r[0];
	uint32_t a = stack_with(r, 0x1100, 10);
	stack_with(r, 0x1100, 10);
	for (int i = 0; i < 2; i++) {
		struct hp_live_v2 v = {.stack_id = a,
		                       .size = 10,
		                       .charged = 10,
		                       .tid = 5 + (uint32_t)i,
		                       .ts_ns = 7};
		CHECK(livetab_insert(r, 0x5000 + 0x100 * (uint64_t)i, &v) == 0);
	}
	const char name[] = "after-load";
	struct hp_client_msg m = {.magic = HP_WIRE_MAGIC,
	                          .type = HP_CMSG_SNAPSHOT,
	                          .arg = sizeof(name) - 1};
	CHECK(send(ce.fd, &m, 10, 0) == 10);
	collector_poll_client(&c, t);
	CHECK(send(ce.fd, (char *)&m + 10, 6, 0) == 6);
	CHECK(send(ce.fd, name, 4, 0) == 4);
	collector_poll_client(&c, t);
	uint32_t st = 99;
	CHECK(recv_region(&ce, &st) == -1); /* nothing yet */
	CHECK(send(ce.fd, name + 4, sizeof(name) - 5, 0) ==
	      (ssize_t)sizeof(name) - 5);
	collector_poll_client(&c, t);
	/* The answer: a welcome and no descriptor. */
	struct hp_welcome w;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &w, .iov_len = sizeof(w)};
	struct msghdr msg = {.msg_iov = &iov,
	                     .msg_iovlen = 1,
	                     .msg_control = cbuf,
	                     .msg_controllen = sizeof(cbuf)};
	CHECK(recvmsg(ce.fd, &msg, MSG_DONTWAIT) == (ssize_t)sizeof(w));
	CHECK_EQ_U64(msg.msg_controllen, 0);
	CHECK_EQ_U64(w.status, HP_WELCOME_ACCEPT);
	CHECK_EQ_U64(w.magic, HP_WIRE_MAGIC);
	CHECK_EQ_U64(w.answer_to, HP_CMSG_SNAPSHOT);
	CHECK_EQ_U64(t->snapshots, 1);
	CHECK(!t->proto_error);
	/* Then a GROW still works on the same connection. */
	send_msg(ce.fd, HP_WIRE_MAGIC, HP_CMSG_GROW, 16);
	collector_poll_client(&c, t);
	CHECK(recv_region(&ce, &st) == 0);
	CHECK_EQ_U64(st, HP_WELCOME_ACCEPT);
	CHECK_EQ_U64(ce.n, 2);
	/* Length 128: too long. */
	m.arg = HP_SNAPSHOT_NAME_MAX;
	CHECK(send(ce.fd, &m, sizeof(m), 0) == sizeof(m));
	collector_poll_client(&c, t);
	CHECK(t->proto_error);
	detach(&ce);
	sqlite3 *db = unit_db_close(&u, &c);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_dump"
	                    " WHERE name = 'after-load' AND reason ="
	                    " 'snapshot' AND blocks_in_flight = 0"),
	             1);
	CHECK_EQ_U64(q1(db, "SELECT count(*) || sum(tid) FROM heapprof_block"),
	             211);
	CHECK_EQ_U64(q1(db, "SELECT count(DISTINCT callsite_id) FROM"
	                    " heapprof_block"),
	             1);
	collector_close(&c);
	unit_db_cleanup(&u, db);

	/* Length 0 is a protocol error too. */
	struct collector c2;
	unit_db_open(&u, &c2, &o);
	t = attach(&c2, &ce, HP_LAYOUT_VERSION);
	m.arg = 0;
	CHECK(send(ce.fd, &m, sizeof(m), 0) == sizeof(m));
	collector_poll_client(&c2, t);
	CHECK(t->proto_error);
	detach(&ce);
	db = unit_db_close(&u, &c2);
	collector_close(&c2);
	unit_db_cleanup(&u, db);
}

/* writer_thread: a job that holds the writer until released. */
static _Atomic int gate_open;

static int gate_run(void *arg)
{
	(void)arg;
	for (int i = 0; i < 10000 && !atomic_load(&gate_open); i++)
		usleep(1000);
	return 0;
}

static void gate_fin(void *arg, int rc)
{
	(void)arg;
	(void)rc;
}

static int group_done_calls;

static void group_done(struct dump_group *g)
{
	(void)g;
	group_done_calls++;
}

/*
 * With the writer thread (collector_writer_start), nothing the collector
 * answers waits for the profile: while the writer is held, a client is
 * welcomed and its dumps, a named snapshot, a group and its row's end
 * are queued; the regions stay mapped for the dumps queued before the
 * target's retirement; once released, everything is written in order
 * (each dump reads the regions when the writer gets to it) and the
 * snapshot answered.
 */
static void test_writer_thread(void)
{
	struct collector c;
	struct collector_opts o = {
	        .interval = 1, .max_frames = 64, .shmem_size = MIB};
	struct unit_db u;
	unit_db_open(&u, &c, &o);
	collector_writer_start(&c);
	CHECK(jobq_fd(&c.wq) >= 0);
	atomic_store(&gate_open, 0);
	jobq_submit(&c.wq, gate_run, gate_fin, NULL, NULL, 0, 0);

	struct client_end ce;
	struct target *t = attach(&c, &ce, HP_LAYOUT_VERSION);
	struct hp_region *r = &ce.r[0];
	stack_with(r, 0x1100, 10);
	stack_with(r, 0x1100, 10);
	CHECK(collector_dump(&c, t, "one", 1000) == 0);
	stack_with(r, 0x1100, 10);
	CHECK(collector_dump(&c, t, "periodic", 2000) == 0);
	CHECK(collector_periodic_pending(&c));
	const char name[] = "held";
	struct hp_client_msg m = {.magic = HP_WIRE_MAGIC,
	                          .type = HP_CMSG_SNAPSHOT,
	                          .arg = sizeof(name) - 1};
	CHECK(send(ce.fd, &m, sizeof(m), 0) == sizeof(m));
	CHECK(send(ce.fd, name, sizeof(name) - 1, 0) ==
	      (ssize_t)sizeof(name) - 1);
	collector_poll_client(&c, t);
	struct dump_group g = {.done = group_done};
	group_done_calls = 0;
	collector_dump_group(&c, 0, "request", &g);
	/* Held: no answer yet, no group end. */
	struct hp_welcome w;
	CHECK(recv(ce.fd, &w, sizeof(w), MSG_DONTWAIT) == -1);
	jobq_poll(&c.wq);
	CHECK_EQ_U64(group_done_calls, 0);
	CHECK_EQ_U64(t->snapshots, 0);
	/* Its regions are unmapped after those dumps, which read them. */
	collector_retire(&c, t);
	CHECK(collector_end_row(&c, t, 4000, 0, true) == 0);

	atomic_store(&gate_open, 1);
	CHECK_EQ_U64(collector_writer_stop(&c), 0);
	CHECK_EQ_U64(jobq_fd(&c.wq), (uint64_t)-1);
	CHECK(!collector_periodic_pending(&c));
	CHECK_EQ_U64(group_done_calls, 1);
	CHECK_EQ_U64(g.dumps, 1);
	CHECK_EQ_U64(g.errors, 0);
	CHECK_EQ_U64(t->snapshots, 1);
	CHECK(recv(ce.fd, &w, sizeof(w), MSG_DONTWAIT) == (ssize_t)sizeof(w));
	CHECK_EQ_U64(w.answer_to, HP_CMSG_SNAPSHOT);
	CHECK_EQ_U64(w.status, HP_WELCOME_ACCEPT);
	detach(&ce);
	sqlite3 *db = unit_db_close(&u, &c);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_dump"), 4);
	/* Each dump read the region when the writer got to it: all three. */
	CHECK_EQ_U64(q1(db, "SELECT sum(count) FROM heap_profile_allocation"
	                    " WHERE ts = 1000"),
	             3);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heap_profile_allocation"
	                    " WHERE ts = 2000"),
	             0);
	/* In the order asked for: the ids follow. */
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_dump d1 JOIN"
	                    " heapprof_dump d2 ON d2.id = d1.id + 1 WHERE"
	                    " d1.reason = 'one' AND d2.reason = 'periodic'"),
	             1);
	CHECK_EQ_U64(q1(db, "SELECT id FROM heapprof_dump WHERE reason ="
	                    " 'request'"),
	             4);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_dump WHERE"
	                    " name = 'held' AND id = 3"),
	             1);
	CHECK_EQ_U64(q1(db, "SELECT exit_status * 10 + disconnected FROM"
	                    " heapprof_process"),
	             1);
	CHECK_EQ_U64(q1(db, "SELECT end_ts FROM process"), 4000);
	collector_close(&c);
	unit_db_cleanup(&u, db);
}

/* heapprof_event (a virtual table over the trace's chunks) in every
 * connection of the test, as rd_open and the writer register it. */
static int register_events(sqlite3 *db, char **err,
                           const struct sqlite3_api_routines *api)
{
	(void)err;
	(void)api;
	return tr_events_register(db);
}

/*
 * A peak is dumped once, whatever its time: at -i 1 the collector applies
 * the live table's log after a dump may have read the table, and the peak
 * it sets then carries the allocation's own time, older than that read
 * (CI: the last 1 MiB block of a climbing heap never dumped).  Its dump
 * goes after the process's last dump and before the next; the writer
 * keeps the highest.
 */
static void test_peak_late(void)
{
	struct collector c;
	struct collector_opts o = {.interval = 1,
	                           .max_frames = 64,
	                           .shmem_size = MIB,
	                           .config_flags = HP_CFG_TRACK_MAX,
	                           .peak_dumps = true};
	struct unit_db u;
	unit_db_open(&u, &c, &o);
	struct client_end ce;
	struct target *t = attach(&c, &ce, HP_LAYOUT_VERSION);
	struct hp_region *r = &ce.r[0];
	CHECK(r->stack_max != NULL);
	const uint64_t pcs[] = {0x1100, 0x1200};
	bool is_new;
	uint32_t id = stacktab_intern(r, 0, pcs, 2, 0, &is_new);
	CHECK(id != 0);
	uint64_t t0 = hp_clock_ns(CLOCK_BOOTTIME);
	peak_alloc(r, id, 500, t0);
	CHECK(collector_dump(&c, t, "periodic", 0) == 0);
	/* Allocated before that dump read the table, applied after it. */
	peak_alloc(r, id, 500, t0 + 1);
	CHECK(collector_dump(&c, t, "periodic", 0) == 0);
	/* No new peak: no other peak dump. */
	CHECK(collector_dump(&c, t, "periodic", 0) == 0);
	detach(&ce);
	collector_poll_client(&c, t);
	CHECK(collector_dump_final(&c, t, "end", 0) == 0);
	sqlite3 *db = unit_db_close(&u, &c);
	CHECK_EQ_U64(q1(db, "SELECT max_live_bytes FROM heapprof_process"),
	             1000);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_dump"
	                    " WHERE reason = 'peak'"),
	             1);
	CHECK_EQ_U64(q1(db, "SELECT max_live_bytes FROM heapprof_dump"
	                    " WHERE reason = 'peak' AND at_max = 1"),
	             1000);
	/* After the first periodic dump, whose time is later than the
	 * allocation's. */
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_dump a JOIN"
	                    " heapprof_dump b ON b.upid = a.upid AND"
	                    " b.id > a.id WHERE b.ts <= a.ts"),
	             0);
	CHECK_EQ_U64(q1(db, "SELECT (SELECT ts FROM heapprof_dump WHERE"
	                    " reason = 'peak') > (SELECT min(ts) FROM"
	                    " heapprof_dump WHERE reason = 'periodic')"),
	             1);
	CHECK_EQ_U64(q1(db, "SELECT sum(size) FROM heap_profile_allocation"
	                    " WHERE ts <= (SELECT ts FROM heapprof_dump"
	                    " WHERE reason = 'peak')"),
	             1000);
	CHECK_EQ_U64(q1(db, "SELECT count(*) FROM heapprof_dump"), 5);
	collector_close(&c);
	unit_db_cleanup(&u, db);
}

int main(void)
{
	sqlite3_auto_extension((void (*)(void))register_events);
	static const struct unit_test tests[] = {
	        {"grow_and_dump", test_grow_and_dump},
	        {"at_max", test_at_max},
	        {"pending_hellos", test_pending_hellos},
	        {"v1_hello", test_v1_hello},
	        {"trace_streaming", test_trace_streaming},
	        {"trace_oneshot_ring", test_trace_oneshot_ring},
	        {"snapshot_msg", test_snapshot_msg},
	        {"writer_thread", test_writer_thread},
	        {"peak_late", test_peak_late},
	        {NULL, NULL},
	};
	return unit_main("collector", tests);
}
