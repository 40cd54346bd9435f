/*
 * The threads' records (src/client/thread.c, compiled in with a pool of
 * 64): a thread takes one at its first use and keeps it; it gives it back
 * when it exits (the key's destructor), and takes none again in the rest
 * of its exit (other keys' destructors); 20,000 threads that come and go
 * use a few records, never run the pool out, and leave it as they found
 * it; threads past the pool's size run without one and are counted once
 * each; a signal handler that takes the record while its thread is
 * taking it leaves one record installed and none lost; a fork child
 * keeps only its own.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"

#define THREAD_RECORDS    64u
#define THREAD_GAP_BLOCKS 16u
#include "../../src/client/thread.c"
#include "unwind_stub.h"

__thread struct client_tls hp_tls;

static uint32_t used(void)
{
	return atomic_load(&rec_pool.used);
}

static uint32_t gaps_used(void)
{
	return atomic_load(&gap_pool.used);
}

static void test_claim_and_keep(void)
{
	struct client_thread *th = client_thread();
	CHECK(th != NULL);
	CHECK(client_thread() == th);
	CHECK(hp_tls.th == th);
	CHECK(thread_heap_gaps(th) != NULL);
	CHECK(thread_heap_gaps(th) == thread_heap_gaps(th));
	CHECK(atomic_load(&key_state) == KEY_READY);
	CHECK_EQ_U64(used(), 1);
}

/* ---- churn ---------------------------------------------------------- */

#define CHURN_THREADS 20000
#define CHURN_BATCH   8

static _Atomic int churn_bad;

static void *churn_main(void *arg)
{
	(void)arg;
	struct client_thread *th = client_thread();
	if (!th || th->sm.rng != 0 || th->gaps != 0 || th->stack_tried)
		atomic_fetch_add(&churn_bad, 1); /* not a clean record */
	if (th) {
		th->sm.rng = 1; /* dirty it: the next taker must not see it */
		th->stack_tried = 1;
		if (!thread_heap_gaps(th))
			atomic_fetch_add(&churn_bad, 1);
	}
	return NULL;
}

static void test_churn(void)
{
	uint32_t u0 = used(), g0 = gaps_used();
	uint64_t m0 = atomic_load(&rec_pool.misses);
	for (int i = 0; i < CHURN_THREADS; i += CHURN_BATCH) {
		pthread_t t[CHURN_BATCH];
		for (int k = 0; k < CHURN_BATCH; k++)
			CHECK(pthread_create(&t[k], NULL, churn_main, NULL) ==
			      0);
		for (int k = 0; k < CHURN_BATCH; k++)
			pthread_join(t[k], NULL);
	}
	CHECK_EQ_U64(atomic_load(&churn_bad), 0);
	CHECK_EQ_U64(used(), u0);
	CHECK_EQ_U64(gaps_used(), g0);
	CHECK_EQ_U64(atomic_load(&rec_pool.misses), m0);
	CHECK(atomic_load(&rec_pool.most) <= u0 + CHURN_BATCH);
	CHECK(atomic_load(&gap_pool.most) <= g0 + CHURN_BATCH);
	printf("  churn: %d threads, records at most %u at once, %u ever "
	       "made\n",
	       CHURN_THREADS, atomic_load(&rec_pool.most),
	       atomic_load(&rec_pool.fresh));
}

/* ---- what runs after the destructor ---------------------------------- */

static pthread_key_t later_key;
static _Atomic int later_ran;
static struct client_thread *later_saw = (struct client_thread *)-1;
static struct client_thread *later_tls;

/* A key made after ours: its destructor runs after ours, in the same
 * round, as a program's key destructors and glibc's cleanup do. */
static void later_dtor(void *v)
{
	(void)v;
	later_saw = client_thread();
	later_tls = hp_tls.th;
	atomic_store(&later_ran, 1);
}

static void *exiting_main(void *arg)
{
	(void)arg;
	CHECK(client_thread() != NULL);
	pthread_setspecific(later_key, (void *)1);
	return NULL;
}

static void test_none_after_exit(void)
{
	uint32_t u0 = used();
	CHECK(pthread_key_create(&later_key, later_dtor) == 0);
	CHECK(later_key > exit_key);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, exiting_main, NULL) == 0);
	pthread_join(t, NULL);
	CHECK(atomic_load(&later_ran));
	CHECK(later_saw == NULL);
	CHECK(later_tls == HP_THREAD_GONE);
	CHECK_EQ_U64(used(), u0);
	pthread_key_delete(later_key);
}

/* ---- more threads than records ---------------------------------------- */

#define MANY 80
static pthread_barrier_t many_bar;
static _Atomic int many_with, many_without, many_bad;

static void *many_main(void *arg)
{
	(void)arg;
	struct client_thread *th = client_thread();
	pthread_barrier_wait(&many_bar); /* all alive at once */
	if (th)
		atomic_fetch_add(&many_with, 1);
	else
		atomic_fetch_add(&many_without, 1);
	/* Asked again: the same answer, counted once. */
	if (client_thread() != th)
		atomic_fetch_add(&many_bad, 1);
	pthread_barrier_wait(&many_bar);
	return NULL;
}

static void test_more_threads_than_records(void)
{
	uint32_t u0 = used();
	uint64_t m0 = atomic_load(&rec_pool.misses);
	pthread_barrier_init(&many_bar, NULL, MANY);
	pthread_t t[MANY];
	for (int k = 0; k < MANY; k++)
		CHECK(pthread_create(&t[k], NULL, many_main, NULL) == 0);
	for (int k = 0; k < MANY; k++)
		pthread_join(t[k], NULL);
	pthread_barrier_destroy(&many_bar);
	CHECK_EQ_U64(atomic_load(&many_with), THREAD_RECORDS - u0);
	CHECK_EQ_U64(atomic_load(&many_without), MANY - (THREAD_RECORDS - u0));
	CHECK_EQ_U64(atomic_load(&many_bad), 0);
	CHECK_EQ_U64(atomic_load(&rec_pool.misses) - m0,
	             MANY - (THREAD_RECORDS - u0));
	CHECK_EQ_U64(used(), u0);
	/* And the pool serves the next thread again. */
	pthread_t again;
	atomic_store(&churn_bad, 0);
	CHECK(pthread_create(&again, NULL, churn_main, NULL) == 0);
	pthread_join(again, NULL);
	CHECK_EQ_U64(atomic_load(&churn_bad), 0);
}

/* ---- a signal handler that takes the record meanwhile ----------------- */

static volatile sig_atomic_t sig_seen;
static _Atomic int sig_bad;

static void on_alarm(int sig)
{
	(void)sig;
	int saved = errno;
	struct client_thread *th = client_thread();
	if (th && __atomic_load_n(&hp_tls.th, __ATOMIC_RELAXED) != th)
		atomic_fetch_add(&sig_bad, 1);
	sig_seen++;
	errno = saved;
}

static void test_signal_during_claim(void)
{
	struct client_thread *keep = hp_tls.th;
	uint32_t u0 = used();
	struct sigaction sa = {.sa_handler = on_alarm};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, 20}, {0, 20}};
	setitimer(ITIMER_REAL, &it, NULL);
	int bad = 0;
	for (int i = 0; i < 2000000; i++) {
		__atomic_store_n(&hp_tls.th, NULL, __ATOMIC_RELAXED);
		struct client_thread *th = thread_claim();
		if (!th || __atomic_load_n(&hp_tls.th, __ATOMIC_RELAXED) != th)
			bad++;
		if (th)
			thread_exit(th); /* as at the thread's exit */
	}
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_DFL);
	hp_tls.th = keep;
	pthread_setspecific(exit_key, keep);
	CHECK_EQ_U64(bad, 0);
	CHECK_EQ_U64(atomic_load(&sig_bad), 0);
	CHECK(sig_seen > 0);
	CHECK_EQ_U64(used(), u0); /* none lost, none taken twice */
	printf("  signal: %d handlers ran during 2000000 takes\n",
	       (int)sig_seen);
}

/* ---- fork --------------------------------------------------------------- */

static pthread_barrier_t fork_bar;

static void *holder_main(void *arg)
{
	(void)arg;
	client_thread();
	pthread_barrier_wait(&fork_bar); /* has a record */
	pthread_barrier_wait(&fork_bar); /* the fork is done */
	return NULL;
}

static void test_fork_child_keeps_its_own(void)
{
	struct client_thread *mine = client_thread();
	uint32_t u0 = used();
	pthread_barrier_init(&fork_bar, NULL, 5);
	pthread_t t[4];
	for (int k = 0; k < 4; k++)
		pthread_create(&t[k], NULL, holder_main, NULL);
	pthread_barrier_wait(&fork_bar);
	CHECK_EQ_U64(used(), u0 + 4);
	pid_t pid = fork();
	if (pid == 0) {
		/* thread_setup's handler ran: only this thread's record. */
		int ok = used() == 1 && client_thread() == mine &&
		         gaps_used() == (mine->gaps ? 1u : 0u);
		_exit(ok ? 0 : 1);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	pthread_barrier_wait(&fork_bar);
	for (int k = 0; k < 4; k++)
		pthread_join(t[k], NULL);
	pthread_barrier_destroy(&fork_bar);
	CHECK_EQ_U64(used(), u0);
}

int main(void)
{
	thread_setup();
	static const struct unit_test tests[] = {
	        {"claim_and_keep", test_claim_and_keep},
	        {"churn", test_churn},
	        {"none_after_exit", test_none_after_exit},
	        {"more_threads_than_records", test_more_threads_than_records},
	        {"signal_during_claim", test_signal_during_claim},
	        {"fork_child_keeps_its_own", test_fork_child_keeps_its_own},
	        {NULL, NULL},
	};
	return unit_main("client_thread", tests);
}
