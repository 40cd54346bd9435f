/*
 * api_forkcb: callbacks in a fork child.  Heap "fk.heap" has enable and
 * disable callbacks that print "enabled parent|child INTERVAL" and
 * "disabled parent|child" on stdout (one write each).  The parent
 * registers it and reports one block; the child reports one block, then
 * waits up to argv[1] ms (default 10000) for its own enable callback (a
 * followed child gets one from its own heapprof-cb thread, started by that
 * report), prints "child: enabled" or "child: not enabled", reports a second
 * block and exits.  The parent waits for it and exits.
 *
 * fk.heap under -i 1: parent 1 block of 10 B; child 20 B + 30 B.
 */
#include <heapprof/heap_profile.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pid_t parent;
static atomic_int enabled_here;

static void say(const char *what, uint64_t interval)
{
	char b[96];
	const char *who = getpid() == parent ? "parent" : "child";
	int n = interval ? snprintf(b, sizeof(b), "%s %s %llu\n", what, who,
	                            (unsigned long long)interval)
	                 : snprintf(b, sizeof(b), "%s %s\n", what, who);
	if (write(1, b, (size_t)n) < 0)
		return;
}

static void on_enable(void *data, const AHeapProfileEnableCallbackInfo *i)
{
	(void)data;
	say("enabled", AHeapProfileEnableCallbackInfo_getSamplingInterval(i));
	atomic_store(&enabled_here, 1);
}

static void on_disable(void *data, const AHeapProfileDisableCallbackInfo *i)
{
	(void)data;
	(void)i;
	say("disabled", 0);
}

int main(int argc, char **argv)
{
	int wait_ms = argc > 1 ? atoi(argv[1]) : 10000;
	parent = getpid();
	AHeapInfo *info = AHeapInfo_create("fk.heap");
	AHeapInfo_setEnabledCallback(info, on_enable, NULL);
	AHeapInfo_setDisabledCallback(info, on_disable, NULL);
	uint32_t heap = AHeapProfile_registerHeap(info);
	AHeapProfile_reportAllocation(heap, 1, 10);
	pid_t c = fork();
	if (c < 0)
		return 1;
	if (c == 0) {
		atomic_store(&enabled_here, 0);
		AHeapProfile_reportAllocation(heap, 2, 20);
		struct timespec ms = {0, 1000000};
		for (int i = 0; i < wait_ms && !atomic_load(&enabled_here); i++)
			nanosleep(&ms, NULL);
		const char *m = atomic_load(&enabled_here)
		                        ? "child: enabled\n"
		                        : "child: not enabled\n";
		if (write(1, m, strlen(m)) < 0)
			_exit(1);
		AHeapProfile_reportAllocation(heap, 3, 30);
		_exit(0);
	}
	int st = 0;
	waitpid(c, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
