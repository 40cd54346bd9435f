/*
 * The background checkpointer (see ckpt.h).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "profile/ckpt.h"

struct ckpt {
	sqlite3 *writer;
	sqlite3 *db; /* our own connection */
	int pages;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_cond_t idle; /* busy went false */
	bool kicked, quit;
	bool busy; /* a checkpoint runs: the thread's or ckpt_now's */
};

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
		/* Whatever it could not copy (a reader in the way) is
		 * copied next time, or by the writer's own (ckpt_now). */
		sqlite3_wal_checkpoint_v2(
		        c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
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

struct ckpt *ckpt_start(sqlite3 *writer, const char *path, int pages)
{
	struct ckpt *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->writer = writer;
	c->pages = pages > 0 ? pages : 1;
	/* A connection is in WAL mode once it has read the file; until then
	 * a checkpoint does nothing. */
	if (sqlite3_open_v2(path, &c->db,
	                    SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
	                    NULL) != SQLITE_OK ||
	    sqlite3_exec(c->db, "SELECT count(*) FROM sqlite_master", NULL,
	                 NULL, NULL) != SQLITE_OK)
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
	sqlite3_close(c->db);
	free(c);
	return NULL;
}

int ckpt_now(struct ckpt *c, sqlite3 *writer)
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
	int rc = sqlite3_wal_checkpoint_v2(
	        writer, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
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
	/* The writer's own checkpoint again, at SQLite's default of 1000
	 * pages (this replaces our hook). */
	sqlite3_wal_autocheckpoint(c->writer, 1000);
	pthread_mutex_lock(&c->mu);
	c->quit = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->thread, NULL);
	pthread_cond_destroy(&c->idle);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	sqlite3_close(c->db);
	free(c);
}
