/*
 * api_misuse bare|profiled: every way to misuse the custom allocator API,
 * and what each call must return (include/heapprof/heap_profile.h).
 *
 * Prints one line per check, "NAME: VALUE", where VALUE is what the call
 * returned, so the test compares stdout with the lines it expects; after
 * each call it also checks that errno is what it was before ("errno
 * changed" lines otherwise).  Nothing else goes to stdout.  The library
 * prints its own complaints on stderr.
 *
 * "profiled" is for a run under `heapprof record --all-heaps -i 1`, where
 * reports on a good heap id return true; "bare" for a run with no
 * session, where every report returns false.
 *
 * Checks, in order:
 *   AHeapInfo_create(NULL), (""), a 64-byte name, ("libc.malloc"): NULL
 *   a 63-byte name, then "h2".."h63": 63 heaps created; "h64", "h65": NULL
 *   AHeapInfo_setEnabledCallback / setDisabledCallback (NULL, ...): NULL
 *   AHeapProfileEnableCallbackInfo_getSamplingInterval(NULL): 0
 *   AHeapProfile_registerHeap(NULL), (a pointer not from create): 0
 *   registering 62 of the 63 heaps: distinct ids in 1..63; again: same id
 *   reports (reportAllocation, reportSample) on heap 0, 999, 64, the one
 *   created heap that is not registered: false; reportFree on them: no
 *   crash; on a registered heap: true only when profiled.
 */
#include <heapprof/heap_profile.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int errno_bad;

/* Calls the API with errno set to a marker and counts the calls that
 * change it; stdio is used only outside (it may set errno itself). */
static void errno_check(int e, const char *what)
{
	if (e != 4321) {
		printf("errno changed by %s: %d\n", what, e);
		errno_bad++;
	}
}
#define API(T, expr, what)                                                     \
	({                                                                     \
		errno = 4321;                                                  \
		T r_ = (expr);                                                 \
		int e_ = errno;                                                \
		errno_check(e_, what);                                         \
		r_;                                                            \
	})
#define API_VOID(expr, what)                                                   \
	do {                                                                   \
		errno = 4321;                                                  \
		expr;                                                          \
		int e_ = errno;                                                \
		errno_check(e_, what);                                         \
	} while (0)

static const char *nul(const void *p)
{
	return p ? "non-NULL" : "NULL";
}

static void cb(void *d, const AHeapProfileEnableCallbackInfo *i)
{
	(void)d;
	(void)i;
}

static void dcb(void *d, const AHeapProfileDisableCallbackInfo *i)
{
	(void)d;
	(void)i;
}

int main(int argc, char **argv)
{
	if (argc != 2 ||
	    (strcmp(argv[1], "bare") && strcmp(argv[1], "profiled"))) {
		fprintf(stderr, "usage: api_misuse bare|profiled\n");
		return 2;
	}
	int profiled = !strcmp(argv[1], "profiled");
	char name64[65], name63[64];
	memset(name64, 'x', 64);
	name64[64] = '\0';
	memset(name63, 'y', 63);
	name63[63] = '\0';

	printf("create(NULL): %s\n",
	       nul(API(AHeapInfo *, AHeapInfo_create(NULL), "create(NULL)")));
	printf("create(\"\"): %s\n",
	       nul(API(AHeapInfo *, AHeapInfo_create(""), "create(\"\")")));
	printf("create(64 bytes): %s\n",
	       nul(API(AHeapInfo *, AHeapInfo_create(name64),
	               "create(64 bytes)")));
	printf("create(\"libc.malloc\"): %s\n",
	       nul(API(AHeapInfo *, AHeapInfo_create("libc.malloc"),
	               "create(libc.malloc)")));

	AHeapInfo *infos[63];
	int made = 0;
	infos[0] =
	        API(AHeapInfo *, AHeapInfo_create(name63), "create(63 bytes)");
	made += infos[0] != NULL;
	printf("create(63 bytes): %s\n", nul(infos[0]));
	for (int i = 1; i < 63; i++) {
		char n[16];
		snprintf(n, sizeof(n), "h%d", i + 1);
		infos[i] = API(AHeapInfo *, AHeapInfo_create(n), "create(hN)");
		made += infos[i] != NULL;
	}
	printf("created: %d\n", made);
	printf("create(\"h64\"): %s\n",
	       nul(API(AHeapInfo *, AHeapInfo_create("h64"), "create(h64)")));
	printf("create(\"h65\"): %s\n",
	       nul(API(AHeapInfo *, AHeapInfo_create("h65"), "create(h65)")));

	printf("setEnabledCallback(NULL): %s\n",
	       nul(API(AHeapInfo *,
	               AHeapInfo_setEnabledCallback(NULL, cb, NULL),
	               "setEnabledCallback(NULL)")));
	printf("setDisabledCallback(NULL): %s\n",
	       nul(API(AHeapInfo *,
	               AHeapInfo_setDisabledCallback(NULL, dcb, NULL),
	               "setDisabledCallback(NULL)")));
	printf("getSamplingInterval(NULL): %llu\n",
	       (unsigned long long)API(
	               uint64_t,
	               AHeapProfileEnableCallbackInfo_getSamplingInterval(NULL),
	               "getSamplingInterval(NULL)"));
	printf("registerHeap(NULL): %u\n",
	       API(uint32_t, AHeapProfile_registerHeap(NULL),
	           "registerHeap(NULL)"));
	static char not_an_info[256];
	printf("registerHeap(not an info): %u\n",
	       API(uint32_t,
	           AHeapProfile_registerHeap((AHeapInfo *)not_an_info),
	           "registerHeap(not an info)"));

	/* Register all but the last; ids distinct, in 1..63. */
	int seen[64] = {0}, bad_ids = 0;
	uint32_t first = 0;
	for (int i = 0; i < 62 && i < made; i++) {
		uint32_t id = API(uint32_t, AHeapProfile_registerHeap(infos[i]),
		                  "registerHeap");
		if (i == 0)
			first = id;
		if (id < 1 || id > 63 || seen[id])
			bad_ids++;
		else
			seen[id] = 1;
	}
	printf("registered: 62 heaps, %d bad ids\n", bad_ids);
	uint32_t again = API(uint32_t, AHeapProfile_registerHeap(infos[0]),
	                     "registerHeap(again)");
	printf("registerHeap(same info) again: %s\n",
	       again == first ? "same id" : "another id");
	uint32_t unreg = 0;
	for (uint32_t id = 1; id <= 63; id++)
		if (!seen[id])
			unreg = id;

	uint32_t bad[] = {0, 999, 64, unreg};
	const char *bad_name[] = {"0", "999", "64", "unregistered"};
	for (int i = 0; i < 4; i++) {
		int a = API(int, AHeapProfile_reportAllocation(bad[i], 1, 100),
		            "reportAllocation");
		printf("reportAllocation(%s): %d\n", bad_name[i], a);
		int b = API(int, AHeapProfile_reportSample(bad[i], 2, 100),
		            "reportSample");
		printf("reportSample(%s): %d\n", bad_name[i], b);
		API_VOID(AHeapProfile_reportFree(bad[i], 1), "reportFree");
		API_VOID(AHeapProfile_reportFree(bad[i], 2), "reportFree");
		API_VOID(AHeapProfile_reportFree(bad[i], 3), "reportFree");
	}
	/* The first report of the process: under a session, the client's
	 * first stack unwind happens here. */
	int good = API(int, AHeapProfile_reportAllocation(first, 1, 100),
	               "reportAllocation(registered)");
	printf("reportAllocation(registered): %s\n",
	       good == profiled ? "as expected" : "unexpected");
	API_VOID(AHeapProfile_reportFree(first, 1), "reportFree(registered)");
	printf("errno kept: %s\n", errno_bad ? "no" : "yes");
	return 0;
}
