/*
 * Unit tests of the collector's client side (collector.c, snapshot.c): a
 * client on a socketpair asks for more room (HP_CMSG_GROW), gets regions
 * of twice the size until the budget is spent, and every dump reads all of
 * its regions as one process, with a stack's identity stable across
 * regions and dumps.  Partial messages are put together; garbage stops the
 * collector reading the client but keeps its data.
 */
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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
	CHECK(snapshot_take_regions(regs, 2, &s) == 0);
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
	for (int i = 0; i < 2; i++) {
		stackmax_touch(r, id);
		atomic_fetch_add(&r->stacks[id].alloc_count, 1);
		atomic_fetch_add(&r->stacks[id].alloc_bytes, 500);
		stackmax_alloc(r, 500);
	}
	stackmax_touch(r, id);
	atomic_fetch_add(&r->stacks[id].free_count, 1);
	atomic_fetch_add(&r->stacks[id].free_bytes, 500);
	stackmax_free(r, 500);

	const struct hp_region *regs[] = {&t->reg[0].region};
	struct snapshot s;
	CHECK(snapshot_take_regions(regs, 1, &s) == 0);
	CHECK_EQ_U64(s.dump.at_max, 1);
	CHECK_EQ_U64(s.dump.max_live_bytes, 1000);
	CHECK(s.dump.max_ts_ns != 0);
	CHECK_EQ_U64(s.dump.nstacks, 1);
	CHECK_EQ_U64(s.dump.stacks[0].alloc_count, 2);
	CHECK_EQ_U64(s.dump.stacks[0].free_count, 0); /* at the peak */
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

int main(void)
{
	static const struct unit_test tests[] = {
	        {"grow_and_dump", test_grow_and_dump},
	        {"at_max", test_at_max},
	        {"pending_hellos", test_pending_hellos},
	        {NULL, NULL},
	};
	return unit_main("collector", tests);
}
