/*
 * trace_pattern MARKS_FILE: a known pattern of allocations for the event
 * trace's analyses (tests/integration/test_trace_report.sh):
 *
 *   leak_some       7 blocks of 7777 B, never freed          (leaks)
 *   temp_churn      3000 blocks of 4321 B, each freed at once (temporary)
 *   keep_then_free  5 blocks of 5555 B, freed after a 60 ms sleep: their
 *                   lifetime is longer than any threshold up to 60 ms
 *
 * Before and after each phase it appends "NAME BOOTTIME_NS" to MARKS_FILE
 * (CLOCK_BOOTTIME, the clock of the trace's events), so a test knows which
 * time window holds which phase.  Nothing else allocates: no stdio, the
 * marks are formatted by hand and written with write(2).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEAKS    7
#define LEAK_SZ  7777
#define TEMPS    3000
#define TEMP_SZ  4321
#define KEEPS    5
#define KEEP_SZ  5555
#define SLEEP_MS 60

static void *leaked[LEAKS];
static void *kept[KEEPS];
static volatile unsigned char sink;

static void mark(int fd, const char *name)
{
	struct timespec ts;
	char buf[96], digits[24];
	size_t n = strlen(name), k = 0;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	uint64_t ns =
	        (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	memcpy(buf, name, n);
	buf[n++] = ' ';
	do {
		digits[k++] = (char)('0' + ns % 10);
		ns /= 10;
	} while (ns);
	while (k)
		buf[n++] = digits[--k];
	buf[n++] = '\n';
	if (write(fd, buf, n) != (ssize_t)n)
		_exit(3);
}

__attribute__((noinline)) static void leak_some(void)
{
	for (int i = 0; i < LEAKS; i++) {
		leaked[i] = malloc(LEAK_SZ);
		memset(leaked[i], i, LEAK_SZ);
	}
}

__attribute__((noinline)) static void temp_churn(void)
{
	for (int i = 0; i < TEMPS; i++) {
		unsigned char *p = malloc(TEMP_SZ);
		p[0] = (unsigned char)i;
		sink = p[0];
		free(p);
	}
}

__attribute__((noinline)) static void keep_then_free(int fd)
{
	for (int i = 0; i < KEEPS; i++) {
		kept[i] = malloc(KEEP_SZ);
		memset(kept[i], i, KEEP_SZ);
	}
	mark(fd, "keep_alloc_end");
	/* The blocks' lifetime: the program's own sleep (EINTR: go on). */
	struct timespec left = {0, SLEEP_MS * 1000000L};
	while (nanosleep(&left, &left) != 0)
		;
	for (int i = 0; i < KEEPS; i++)
		free(kept[i]);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return 2;
	mark(fd, "start");
	leak_some();
	mark(fd, "leak_end");
	temp_churn();
	mark(fd, "temp_end");
	keep_then_free(fd);
	mark(fd, "keep_end");
	close(fd);
	return 0;
}
