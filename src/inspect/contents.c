/*
 * --contents-dir: the bytes of a snapshot's blocks, read from the process
 * with process_vm_readv in batches (up to CONTENTS_IOVS segments,
 * CONTENTS_BUF bytes) and written to one file per block.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "inspect/contents.h"

#define CONTENTS_BUF  (4u << 20)
#define CONTENTS_IOVS 1024

struct seg {
	size_t block;
	uint64_t off;
	size_t len;
};

struct contents {
	pid_t pid;
	int dfd;
	const struct prof_block *b;
	size_t nb;
	uint8_t *failed; /* per block: not readable (or not written) */
	uint8_t *buf;
	struct iovec local[CONTENTS_IOVS], remote[CONTENTS_IOVS];
	struct seg seg[CONTENTS_IOVS];
	size_t nseg, used;
	/* The block whose file is open (its segments so far written). */
	size_t cur;
	int cur_fd;
	size_t written, unreadable, custom;
	int status; /* CONTENTS_*; 0 ok */
	int err;    /* errno of a local error */
};

static void block_name(char *buf, size_t len, uint64_t addr)
{
	snprintf(buf, len, "0x%" PRIx64, addr);
}

/* Closes the open block file; drops it if the block turned out
 * unreadable. */
static void close_cur(struct contents *c)
{
	if (c->cur_fd < 0)
		return;
	close(c->cur_fd);
	c->cur_fd = -1;
	if (c->failed[c->cur]) {
		char name[32];
		block_name(name, sizeof(name), c->b[c->cur].address);
		unlinkat(c->dfd, name, 0);
	}
}

static int write_full(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Opens the file of block i (truncated).  0 or a negative errno. */
static int open_block(struct contents *c, size_t i)
{
	char name[32];

	block_name(name, sizeof(name), c->b[i].address);
	int fd = openat(c->dfd, name,
	                O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
	                0600);
	if (fd < 0)
		return -errno;
	c->cur = i;
	c->cur_fd = fd;
	return 0;
}

/* Reads the pending segments in as few calls as the process allows, then
 * writes the ones read whole to their files. */
static void flush_segs(struct contents *c)
{
	size_t i = 0;

	while (i < c->nseg && !c->status) {
		ssize_t r = process_vm_readv(c->pid, &c->local[i], c->nseg - i,
		                             &c->remote[i], c->nseg - i, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EPERM || errno == EACCES)) {
			c->status = CONTENTS_DENY;
			break;
		}
		if (r < 0 && errno == ESRCH) {
			c->status = CONTENTS_GONE;
			break;
		}
		if (r < 0 && errno != EFAULT) {
			c->status = CONTENTS_ERROR;
			c->err = errno;
			break;
		}
		/* Whole segments only: the first one not read is a block
		 * freed (and unmapped) meanwhile, or not memory at all. */
		size_t got = r < 0 ? 0 : (size_t)r;
		while (i < c->nseg && got >= c->seg[i].len) {
			got -= c->seg[i].len;
			i++;
		}
		if (i < c->nseg)
			c->failed[c->seg[i++].block] = 1;
	}
	for (size_t k = 0; k < c->nseg && !c->status; k++) {
		const struct seg *sg = &c->seg[k];
		if (c->cur_fd >= 0 && c->cur != sg->block)
			close_cur(c);
		if (c->failed[sg->block])
			continue;
		int err = 0;
		if (c->cur_fd < 0)
			err = open_block(c, sg->block);
		if (!err)
			err = write_full(c->cur_fd, c->local[k].iov_base,
			                 sg->len);
		if (err) {
			c->status = CONTENTS_ERROR;
			c->err = -err;
		}
	}
	c->nseg = 0;
	c->used = 0;
}

static void add_seg(struct contents *c, size_t block, uint64_t off, size_t len)
{
	if (c->nseg == CONTENTS_IOVS || c->used + len > CONTENTS_BUF)
		flush_segs(c);
	if (c->status)
		return;
	size_t k = c->nseg++;
	c->seg[k] = (struct seg){block, off, len};
	c->local[k] = (struct iovec){c->buf + c->used, len};
	c->remote[k] = (struct iovec){
	        (void *)(uintptr_t)(c->b[block].address + off), len};
	c->used += len;
}

/* Writes the bytes of every block of the libc heap to dir/0xADDRESS. */
static void read_contents(struct contents *c, const char *dir)
{
	struct stat sb;

	c->cur_fd = -1;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		c->status = CONTENTS_ERROR;
		c->err = errno;
		return;
	}
	c->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (c->dfd < 0 || fstat(c->dfd, &sb) < 0) {
		c->status = CONTENTS_ERROR;
		c->err = errno;
		if (c->dfd >= 0)
			close(c->dfd);
		c->dfd = -1;
		return;
	}
	c->failed = calloc(c->nb ? c->nb : 1, 1);
	c->buf = malloc(CONTENTS_BUF);
	if (!c->failed || !c->buf) {
		c->status = CONTENTS_ERROR;
		c->err = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c->nb && !c->status; i++) {
		const struct prof_block *b = &c->b[i];
		/* A custom heap's live key is the id it reported: not an
		 * address in the process. */
		if (b->heap_id != 0) {
			c->failed[i] = 1;
			c->custom++;
			continue;
		}
		if (b->size == 0) {
			flush_segs(c);
			int err = c->status ? 0 : open_block(c, i);
			if (err) {
				c->status = CONTENTS_ERROR;
				c->err = -err;
			}
			close_cur(c);
			continue;
		}
		for (uint64_t off = 0; off < b->size && !c->status;) {
			uint64_t left = b->size - off;
			size_t len = left < CONTENTS_BUF ? (size_t)left
			                                 : CONTENTS_BUF;
			add_seg(c, i, off, len);
			off += len;
		}
	}
	if (!c->status)
		flush_segs(c);
	close_cur(c);
	for (size_t i = 0; i < c->nb; i++) {
		if (c->b[i].heap_id != 0)
			continue;
		if (c->failed[i])
			c->unreadable++;
		else if (!c->status)
			c->written++;
	}
out:
	free(c->failed);
	free(c->buf);
	close(c->dfd);
}
int contents_write(pid_t pid, const struct prof_block *b, size_t nb,
                   const char *dir, struct contents_result *out)
{
	struct contents *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->pid = pid;
	c->b = b;
	c->nb = nb;
	read_contents(c, dir);
	*out = (struct contents_result){
	        .status = c->status,
	        .err = c->err,
	        .written = c->written,
	        .unreadable = c->unreadable,
	        .custom = c->custom,
	};
	free(c);
	return 0;
}
