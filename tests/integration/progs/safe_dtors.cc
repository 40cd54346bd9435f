/*
 * safe_dtors: allocation where a profiler is not usually looking
 * (test_safety.sh):
 *   sd_signal      in a SIGUSR1 handler, raised 300 times from main:
 *                  malloc(48) kept in a ring of 8, the rest freed
 *   sd_atexit      in an atexit handler: 5 x malloc(300), 2 freed
 *   sd_destructor  in an __attribute__((destructor)): 4 x malloc(500),
 *                  all freed
 *   sd_static_dtor in a C++ static object's destructor: 3 x malloc(700),
 *                  1 freed
 *   sd_tls_dtor    in the destructor of a C++ thread_local object, in 50
 *                  threads and in main: malloc(90) + free each time
 * The handlers at exit run after main; their numbers are fixed, so main
 * prints every count line before returning.  They print a line each
 * (flushed) to show they ran.  Exits 23.
 */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "safe_common.h"

static struct sc_count c_sig = {"sd_signal"};

extern "C" NOINLINE void sd_signal(void)
{
	static void *ring[8];
	static int n;
	void *p = malloc(48);
	sc_touch(p, 48);
	sc_alloc(&c_sig, p, 48);
	if (ring[n % 8]) {
		free(ring[n % 8]);
		sc_free(&c_sig, 48);
	}
	ring[n % 8] = p;
	n++;
}

static void on_usr1(int)
{
	sd_signal();
}

extern "C" NOINLINE void sd_atexit(void)
{
	void *p[5];
	for (int i = 0; i < 5; i++) {
		p[i] = malloc(300);
		sc_touch(p[i], 300);
	}
	free(p[0]);
	free(p[1]);
	printf("atexit handler ran\n");
	fflush(stdout);
}

extern "C" NOINLINE void sd_destructor(void)
{
	void *p[4];
	for (int i = 0; i < 4; i++) {
		p[i] = malloc(500);
		sc_touch(p[i], 500);
	}
	for (int i = 0; i < 4; i++)
		free(p[i]);
	printf("destructor ran\n");
	fflush(stdout);
}

__attribute__((destructor)) static void at_unload(void)
{
	sd_destructor();
}

extern "C" NOINLINE void sd_static_dtor(void)
{
	void *p[3];
	for (int i = 0; i < 3; i++) {
		p[i] = malloc(700);
		sc_touch(p[i], 700);
	}
	free(p[2]);
	printf("static destructor ran\n");
	fflush(stdout);
}

struct StaticThing {
	~StaticThing()
	{
		sd_static_dtor();
	}
};
static StaticThing static_thing;

extern "C" NOINLINE void sd_tls_dtor(void)
{
	void *p = malloc(90);
	sc_touch(p, 90);
	free(p);
}

struct TlsThing {
	int used = 0;
	~TlsThing()
	{
		sd_tls_dtor();
	}
};
static thread_local TlsThing tls_thing;

static void *worker(void *arg)
{
	tls_thing.used = 1; /* constructs it: its destructor runs at exit */
	return arg;
}

int main()
{
	struct sigaction sa = {};
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, nullptr);
	atexit(sd_atexit);
	for (int i = 0; i < 300; i++)
		raise(SIGUSR1);
	for (int i = 0; i < 50; i++) {
		pthread_t t;
		if (pthread_create(&t, nullptr, worker, nullptr) != 0)
			return 1;
		pthread_join(t, nullptr);
	}
	tls_thing.used = 1;
	sc_print(&c_sig);
	printf("count sd_atexit 5 1500 3 900\n");
	printf("count sd_destructor 4 2000 0 0\n");
	printf("count sd_static_dtor 3 2100 2 1400\n");
	printf("count sd_tls_dtor 51 4590 0 0\n");
	fflush(stdout);
	return 23;
}
