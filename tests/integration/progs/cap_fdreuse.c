/*
 * cap_fdreuse DIR: the program's descriptors are its own (test_capture.sh).
 *
 * Built by the Makefile with -O0 -fno-omit-frame-pointer
 * -fno-asynchronous-unwind-tables -fno-unwind-tables and without -g: its
 * own code has no CFI, so a DWARF unwinder has to step its frames by frame
 * pointer (libunwind then "validates" addresses with system calls on a
 * pipe of its own).
 *
 *   1. warm-up: main mallocs 1 MiB (sampled at any interval), then
 *      main -> fr_a -> fr_b -> fr_c -> fr_rec -> fr_leaf, 8 x malloc, all
 *      freed, so that a profiler has set up whatever it keeps
 *      (descriptors included);
 *   2. closes descriptors 3..1023, as a daemon does (closefrom), and
 *      opens, in this order, files f0, pipe A, files f1 f2, pipe B, files
 *      f3 f4 f5 in DIR (O_RDWR, created), so they get the lowest numbers
 *      3..12, where a profiler's closed descriptors were;
 *   3. a worker thread (started now: its stack is new to an unwinder)
 *      and main each make ITER x 8 malloc/free calls through fr_a -> fr_b
 *      -> fr_c -> fr_rec (1..24 levels of 256-byte frames, so the stack
 *      reaches pages not seen before) -> fr_leaf; between them main writes
 *      a 37-byte record to every file (write(2), so a stray read that
 *      moves a file offset shows) and 16 bytes into each pipe, and reads
 *      the pipe back (non-blocking read end: a stolen byte is a short
 *      read, never a hang) after the allocations;
 *   4. checks each descriptor is still the file or pipe it opened (fstat
 *      device and inode), each file's size and bytes (pread through the
 *      descriptor and read through a new open of the path), that the pipes
 *      are empty, and prints a checksum of everything read back and "ok".
 *
 * Any damage (a byte read from or written to one of its descriptors by
 * someone else, a descriptor closed or replaced) makes it print what
 * differs and exit 1.  stdout:
 *   fdreuse: descriptors 3..12 (6 files, 2 pipes), iterations 3000
 *   checksum HEX
 *   count fr_leaf AO AS O S   (fr_leaf's allocations, main's and the worker's)
 *   ok
 * Exits 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safe_common.h"

#define NFILES 6
#define NPIPES 2
#define ITER   3000
#define REC    37 /* bytes per record in a file */
#define PREC   16 /* bytes per record in a pipe */
#define RING   32

static struct sc_count c_leaf = {"fr_leaf"};

struct ring {
	void *p[RING];
	size_t n[RING];
};

static int file_fd[NFILES];
static int pipe_fd[NPIPES][2];
static struct stat file_st[NFILES], pipe_st[NPIPES][2];
static char first_error[256];
static unsigned long long csum = 1469598103934665603ull;

/* The first thing that went wrong during the loop. */
__attribute__((format(printf, 1, 2))) static void note_error(const char *fmt,
                                                             ...)
{
	if (first_error[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(first_error, sizeof(first_error), fmt, ap);
	va_end(ap);
}

/* What a short or failed read/write says. */
static const char *io_err(ssize_t n, int err)
{
	return n < 0 ? strerror(err) : "short";
}

static void sum(const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		csum ^= b[i];
		csum *= 1099511628211ull;
	}
}

/* The record number i of file (or pipe) k: known bytes. */
static void record(unsigned char *b, size_t n, int k, int i)
{
	for (size_t j = 0; j < n; j++)
		b[j] = (unsigned char)('a' + (k * 7 + i * 13 + (int)j) % 26);
	b[n - 1] = '\n';
}

NOINLINE void fr_leaf(struct ring *r, int i, int j)
{
	int slot = (i * 8 + j) % RING;
	if (r->p[slot]) {
		free(r->p[slot]);
		sc_free(&c_leaf, r->n[slot]);
	}
	size_t n = (i % 50 == 0 && j == 0)
	                   ? 65536
	                   : 16 + (size_t)((i * 37 + j * 101) % 2000);
	r->p[slot] = malloc(n);
	sc_touch(r->p[slot], n);
	sc_alloc(&c_leaf, r->p[slot], n);
	r->n[slot] = r->p[slot] ? n : 0;
}

NOINLINE void fr_rec(struct ring *r, int i, int j, int depth)
{
	volatile char pad[256];
	pad[0] = (char)depth;
	pad[255] = pad[0];
	if (depth > 1)
		fr_rec(r, i, j, depth - 1);
	else
		fr_leaf(r, i, j);
	sc_sink += (unsigned char)pad[255];
}

NOINLINE void fr_c(struct ring *r, int i)
{
	for (int j = 0; j < 8; j++)
		fr_rec(r, i, j, 1 + (i * 5 + j * 3) % 24);
}
NOINLINE void fr_b(struct ring *r, int i)
{
	fr_c(r, i);
}
NOINLINE void fr_a(struct ring *r, int i)
{
	fr_b(r, i);
}

static void ring_free(struct ring *r)
{
	for (int k = 0; k < RING; k++) {
		if (r->p[k]) {
			free(r->p[k]);
			sc_free(&c_leaf, r->n[k]);
			r->p[k] = NULL;
		}
	}
}

static void *worker(void *arg)
{
	struct ring r = {{0}};
	for (int i = 0; i < ITER; i++)
		fr_a(&r, i + 7);
	ring_free(&r);
	return arg;
}

static int open_file(const char *dir, int k)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/f%d", dir, k);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		fprintf(stderr, "cap_fdreuse: open %s: %s\n", path,
		        strerror(errno));
		exit(2);
	}
	file_fd[k] = fd;
	fstat(fd, &file_st[k]);
	return fd;
}

static void open_pipe(int k)
{
	if (pipe(pipe_fd[k]) != 0) {
		perror("cap_fdreuse: pipe");
		exit(2);
	}
	fcntl(pipe_fd[k][0], F_SETFL, O_NONBLOCK);
	fstat(pipe_fd[k][0], &pipe_st[k][0]);
	fstat(pipe_fd[k][1], &pipe_st[k][1]);
}

static int same(const struct stat *a, int fd)
{
	struct stat b;
	return fstat(fd, &b) == 0 && a->st_dev == b.st_dev &&
	       a->st_ino == b.st_ino;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: cap_fdreuse DIR\n");
		return 2;
	}
	const char *dir = argv[1];
	setvbuf(stdout, NULL, _IOFBF, 4096);

	/* 1. warm-up */
	{
		void *big = malloc(1 << 20); /* main's: not counted */
		sc_touch(big, 1 << 20);
		free(big);
		struct ring r = {{0}};
		fr_a(&r, 1);
		ring_free(&r);
	}

	/* 2. closefrom(3), then the lowest numbers are ours */
	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	int lo = open_file(dir, 0);
	open_pipe(0);
	open_file(dir, 1);
	open_file(dir, 2);
	open_pipe(1);
	open_file(dir, 3);
	open_file(dir, 4);
	int hi = open_file(dir, 5);

	/* 3. allocate while writing to every descriptor */
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) != 0) {
		fprintf(stderr, "cap_fdreuse: pthread_create failed\n");
		return 2;
	}
	struct ring r = {{0}};
	unsigned char b[REC], got[REC];
	for (int i = 0; i < ITER && !first_error[0]; i++) {
		for (int k = 0; k < NFILES; k++) {
			record(b, REC, k, i);
			ssize_t w = write(file_fd[k], b, REC);
			if (w != REC)
				note_error("write to f%d, iteration %d: %s", k,
				           i, io_err(w, errno));
		}
		for (int k = 0; k < NPIPES; k++) {
			record(b, PREC, 10 + k, i);
			ssize_t w = write(pipe_fd[k][1], b, PREC);
			if (w != PREC)
				note_error("write to pipe %c, iteration %d: %s",
				           'A' + k, i, io_err(w, errno));
		}
		fr_a(&r, i);
		for (int k = 0; k < NPIPES; k++) {
			record(b, PREC, 10 + k, i);
			ssize_t n = read(pipe_fd[k][0], got, PREC);
			if (n != PREC)
				note_error(
				        "read from pipe %c, iteration %d: %s",
				        'A' + k, i, io_err(n, errno));
			else if (memcmp(got, b, PREC) != 0)
				note_error("pipe %c, iteration %d: other bytes "
				           "than written",
				           'A' + k, i);
			else
				sum(got, PREC);
		}
	}
	ring_free(&r);
	pthread_join(t, NULL);

	/* 4. verify */
	int bad = 0;
	if (first_error[0]) {
		printf("damage: %s\n", first_error);
		bad = 1;
	}
	for (int k = 0; k < NFILES; k++) {
		if (!same(&file_st[k], file_fd[k])) {
			printf("damage: descriptor %d is no longer file f%d\n",
			       file_fd[k], k);
			bad = 1;
			continue;
		}
		struct stat st;
		fstat(file_fd[k], &st);
		if (st.st_size != (off_t)ITER * REC) {
			printf("damage: f%d has %lld bytes, want %lld\n", k,
			       (long long)st.st_size, (long long)ITER * REC);
			bad = 1;
		}
		off_t pos = lseek(file_fd[k], 0, SEEK_CUR);
		if (pos != (off_t)ITER * REC) {
			printf("damage: f%d's offset is %lld, want %lld\n", k,
			       (long long)pos, (long long)ITER * REC);
			bad = 1;
		}
		char path[4096];
		snprintf(path, sizeof(path), "%s/f%d", dir, k);
		int fd2 = open(path, O_RDONLY);
		for (int i = 0; i < ITER; i++) {
			record(b, REC, k, i);
			if (pread(file_fd[k], got, REC, (off_t)i * REC) !=
			            REC ||
			    memcmp(got, b, REC) != 0) {
				printf("damage: f%d record %d differs (through "
				       "its descriptor)\n",
				       k, i);
				bad = 1;
				break;
			}
			if (fd2 < 0 || read(fd2, got, REC) != REC ||
			    memcmp(got, b, REC) != 0) {
				printf("damage: f%d record %d differs (read "
				       "from %s)\n",
				       k, i, path);
				bad = 1;
				break;
			}
			sum(got, REC);
		}
		if (fd2 >= 0)
			close(fd2);
	}
	for (int k = 0; k < NPIPES; k++) {
		for (int e = 0; e < 2; e++) {
			if (!same(&pipe_st[k][e], pipe_fd[k][e])) {
				printf("damage: descriptor %d is no longer "
				       "pipe %s's %s end\n",
				       pipe_fd[k][e], k ? "B" : "A",
				       e ? "write" : "read");
				bad = 1;
			}
		}
		ssize_t n = read(pipe_fd[k][0], got, 1);
		if (n != -1 || errno != EAGAIN) {
			printf("damage: pipe %s is not empty at the end (read: "
			       "%zd)\n",
			       k ? "B" : "A", n);
			bad = 1;
		}
	}
	printf("fdreuse: descriptors %d..%d (%d files, %d pipes), iterations "
	       "%d\n",
	       lo, hi, NFILES, NPIPES, ITER);
	printf("checksum %016llx\n", csum);
	sc_print(&c_leaf);
	if (bad)
		return 1;
	printf("ok\n");
	return 0;
}
