/*
 * attach_cxx: operator new/delete in a program test_attach.sh attaches to
 * while it runs (it never loads libheapprof itself).  The same shape as
 * attach_phase.c: cx_pre before the attach, "attach_cxx: ready", the
 * phase at the first SIGUSR1, "attach_cxx: phase done", the rest at the
 * second.  Exact with -i 1 (ALLOC_OBJECTS ALLOC_SPACE OBJECTS SPACE):
 *
 *   cx_pre()      8 x new Obj (96 B) before the attach, 6 deleted in the
 *                 phase: made before the attach, nowhere in the profile
 *   cx_new_obj()  16 x new Obj (sizeof 96), 6 deleted (sized delete):
 *                 16 1536 10 960
 *   cx_new_arr()  5 x new int[250] (1000 B, no cookie: trivial type),
 *                 all delete[]: 5 5000 0 0
 *   cx_nothrow()  4 x new (std::nothrow) char[300], 1 delete[]:
 *                 4 1200 3 900
 *   cx_aligned()  3 x new Big (alignas(64), sizeof 128: the aligned
 *                 operator new), 1 deleted: 3 384 2 256
 * Exits 0; the output is the same bare and attached.
 */
#include <csignal>
#include <cstdio>
#include <cstring>
#include <new>

#define NOINLINE __attribute__((noinline, noclone))

struct Obj {
	long v[12];
};
static_assert(sizeof(Obj) == 96, "Obj is 96 bytes");
struct alignas(64) Big {
	char b[128];
};
static_assert(sizeof(Big) == 128, "Big is 128 bytes");

static volatile sig_atomic_t usr1;
static unsigned long sum;
static Obj *pre[8], *objs[16];
static char *nt[4];
static Big *big[3];

static void on_usr1(int)
{
	usr1++;
}

NOINLINE void cx_pre()
{
	for (auto &p : pre) {
		p = new Obj;
		p->v[11] = 7;
		sum += (unsigned long)p->v[11];
	}
}

NOINLINE void cx_new_obj()
{
	for (auto &p : objs) {
		p = new Obj;
		p->v[0] = 1;
		sum += (unsigned long)p->v[0];
	}
	for (int i = 0; i < 6; i++) {
		delete objs[i];
		objs[i] = nullptr;
	}
}

NOINLINE void cx_new_arr()
{
	for (int i = 0; i < 5; i++) {
		int *a = new int[250];
		a[249] = i;
		sum += (unsigned long)a[249];
		delete[] a;
	}
}

NOINLINE void cx_nothrow()
{
	for (auto &p : nt) {
		p = new (std::nothrow) char[300];
		memset(p, 1, 300);
		sum += (unsigned long)p[299];
	}
	delete[] nt[0];
	nt[0] = nullptr;
}

NOINLINE void cx_aligned()
{
	for (auto &p : big) {
		p = new Big;
		p->b[127] = 2;
		sum += (unsigned long)p->b[127];
	}
	delete big[0];
	big[0] = nullptr;
}

static void wait_usr1(sig_atomic_t n, const sigset_t *during)
{
	while (usr1 < n)
		sigsuspend(during);
}

int main()
{
	sigset_t block, during;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, &during);
	sigdelset(&during, SIGUSR1);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, nullptr);

	cx_pre();
	printf("attach_cxx: ready\n");
	fflush(stdout);
	wait_usr1(1, &during);

	for (int i = 0; i < 6; i++) {
		delete pre[i];
		pre[i] = nullptr;
	}
	cx_new_obj();
	cx_new_arr();
	cx_nothrow();
	cx_aligned();
	printf("attach_cxx: phase done\n");
	fflush(stdout);
	wait_usr1(2, &during);

	for (auto p : pre)
		delete p;
	for (auto p : objs)
		delete p;
	for (auto p : nt)
		delete[] p;
	for (auto p : big)
		delete p;
	printf("attach_cxx: exit, checksum %lu\n", sum);
	return 0;
}
