/*
 * The background checkpointer (see ckpt.h), and the room every checkpoint
 * reserves first.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "store/ckpt.h"

struct ckpt {
	sqlite3 *writer;
	sqlite3 *db;  /* our own connection */
	sqlite3 *pin; /* holds the snapshot our checkpoint copies */
	int fd;       /* the database file, for ckpt_room; -1: none */
	int pages;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_cond_t idle; /* busy went false */
	bool kicked, quit;
	bool busy; /* a checkpoint runs: the thread's or ckpt_now's */
};

int64_t ckpt_query_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	int64_t v = -1;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

int ckpt_room(int fd, sqlite3 *db)
{
	if (fd < 0)
		return 0;
	int64_t pages = ckpt_query_int(db, "PRAGMA page_count");
	int64_t page = ckpt_query_int(db, "PRAGMA page_size");
	if (pages <= 0 || page <= 0)
		return 0;
	int64_t need = pages * page;
	/* A reservation past the limit is allowed, the writes into it are
	 * not (EFBIG): the limit is checked here. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (uint64_t)need > rl.rlim_cur)
		return -EFBIG;
	/* A database file has no holes: what it holds is allocated. */
	struct stat sb;
	if (fstat(fd, &sb) != 0 || sb.st_size >= need)
		return 0;
	int rc;
	do
		rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, sb.st_size,
		               need - sb.st_size);
	while (rc != 0 && errno == EINTR);
	if (rc == 0)
		return 0;
	return errno == ENOSPC || errno == EDQUOT || errno == EFBIG ? -errno
	                                                            : 0;
}

/*
 * The thread's checkpoint: the writer commits meanwhile, so the snapshot
 * it copies is pinned first (a read transaction on pin: a checkpoint copies
 * no frame past a reader's snapshot), its room reserved, then copied.
 * Without the pin or the room, nothing: the writer's own checkpoint
 * (ckpt_now) copies it, or says why not.
 */
static void checkpoint(struct ckpt *c)
{
	bool pinned = false;
	if (c->fd >= 0) {
		pinned = c->pin && sqlite3_exec(c->pin,
		                                "BEGIN; SELECT count(*) FROM"
		                                " sqlite_master",
		                                NULL, NULL, NULL) == SQLITE_OK;
		if (!pinned || ckpt_room(c->fd, c->pin) != 0)
			goto out;
	}
	/* Whatever it could not copy (a reader in the way) is copied next
	 * time, or by the writer's own (ckpt_now). */
	sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL,
	                          NULL);
out:
	if (c->pin && !sqlite3_get_autocommit(c->pin))
		sqlite3_exec(c->pin, "COMMIT", NULL, NULL, NULL);
}

static void *run(void *arg)
{
	struct ckpt *c = arg;

	pthread_mutex_lock(&c->mu);
	for (;;) {
		while ((!c->kicked || c->busy) && !c->quit)
			pthread_cond_wait(&c->cv, &c->mu);
		if (!c->kicked)
			break;
		c->kicked = false;
		c->busy = true;
		pthread_mutex_unlock(&c->mu);
		checkpoint(c);
		pthread_mutex_lock(&c->mu);
		c->busy = false;
		pthread_cond_broadcast(&c->idle);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* Called by SQLite in the writer's thread after each commit. */
static int on_commit(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct ckpt *c = arg;

	if (pages >= c->pages) {
		pthread_mutex_lock(&c->mu);
		c->kicked = true;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
	}
	return SQLITE_OK;
}

struct ckpt *ckpt_start(sqlite3 *writer, const char *path, int pages, int fd)
{
	struct ckpt *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->writer = writer;
	c->fd = fd;
	c->pages = pages > 0 ? pages : 1;
	/* A connection is in WAL mode once it has read the file; until then
	 * a checkpoint does nothing. */
	if (sqlite3_open_v2(path, &c->db,
	                    SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
	                    NULL) != SQLITE_OK ||
	    sqlite3_exec(c->db, "SELECT count(*) FROM sqlite_master", NULL,
	                 NULL, NULL) != SQLITE_OK)
		goto fail_db;
	if (fd >= 0 &&
	    sqlite3_open_v2(path, &c->pin,
	                    SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
	                    NULL) != SQLITE_OK)
		goto fail_db;
	if (pthread_mutex_init(&c->mu, NULL) != 0)
		goto fail_db;
	if (pthread_cond_init(&c->cv, NULL) != 0)
		goto fail_mu;
	if (pthread_cond_init(&c->idle, NULL) != 0)
		goto fail_cv;
	if (pthread_create(&c->thread, NULL, run, c) != 0)
		goto fail_idle;
	sqlite3_wal_hook(writer, on_commit, c);
	return c;
fail_idle:
	pthread_cond_destroy(&c->idle);
fail_cv:
	pthread_cond_destroy(&c->cv);
fail_mu:
	pthread_mutex_destroy(&c->mu);
fail_db:
	sqlite3_close(c->pin);
	sqlite3_close(c->db);
	free(c);
	return NULL;
}

int ckpt_now(struct ckpt *c, sqlite3 *writer, int fd, int *room)
{
	if (c) {
		/* SQLite runs one checkpoint at a time and refuses a second
		 * (SQLITE_BUSY, without asking a busy handler): wait for the
		 * thread's, and keep it from starting one until ours is done.
		 * A kick pending is served by ours. */
		pthread_mutex_lock(&c->mu);
		while (c->busy)
			pthread_cond_wait(&c->idle, &c->mu);
		c->kicked = false;
		c->busy = true;
		pthread_mutex_unlock(&c->mu);
	}
	/* No commit can come between: the writer is this thread. */
	*room = ckpt_room(fd, writer);
	int rc = *room ? SQLITE_FULL
	               : sqlite3_wal_checkpoint_v2(writer, NULL,
	                                           SQLITE_CHECKPOINT_PASSIVE,
	                                           NULL, NULL);
	if (c) {
		pthread_mutex_lock(&c->mu);
		c->busy = false;
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
	}
	return rc;
}

void ckpt_stop(struct ckpt *c)
{
	if (!c)
		return;
	/* No automatic checkpoint (this removes our hook): the writer's last
	 * one is its closing one, made with room (profile_finish). */
	sqlite3_wal_autocheckpoint(c->writer, 0);
	pthread_mutex_lock(&c->mu);
	c->quit = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->thread, NULL);
	pthread_cond_destroy(&c->idle);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	sqlite3_close(c->pin);
	sqlite3_close(c->db);
	free(c);
}
