/*
 * hostile_cancelfork: fork with a deferred cancel pending (test_hostile.sh).
 * fork is not a cancellation point, so bare the thread forks and is
 * cancelled at its next cancellation point (waitpid).  main registered
 * atfork handlers that
 * lock and unlock a mutex, as allocators and libraries do; if a profiler
 * made fork a cancellation point (a connect or poll of its own in its
 * prepare handler), the thread would die inside fork with the mutex held
 * by the prepare handler, and main's lock below would hang.
 * Prints "main: lock taken" and "thread: cancelled"; exits 0.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void pre(void)
{
	pthread_mutex_lock(&mu);
}
static void post(void)
{
	pthread_mutex_unlock(&mu);
}

static void *forker(void *a)
{
	pthread_cancel(pthread_self());
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	if (p > 0)
		waitpid(p, NULL, 0); /* the cancellation point: ends here */
	return a;
}

int main(void)
{
	pthread_atfork(pre, post, post);
	pthread_t th;
	void *ret = NULL;
	if (pthread_create(&th, NULL, forker, NULL) != 0)
		return 1;
	pthread_join(th, &ret);
	pthread_mutex_lock(&mu);
	printf("main: lock taken\n");
	printf("thread: %s\n",
	       ret == PTHREAD_CANCELED ? "cancelled" : "returned");
	return 0;
}
