/*
 * Reading a process from /proc: by pid and by name, its status and stat
 * lines, its mappings, its descriptors, its cgroup, its name, command
 * line, executable and working directory.  The one place outside the
 * client that parses /proc (the client, inside the profiled program, has
 * its own readers that make no allocation).
 *
 * Nothing here prints: a function that can fail returns -1 with errno set
 * (ENOENT: no such process, also for the empty files of a zombie being
 * reaped; EPROTO: a line we could not parse), and the caller says what it
 * means in its own words.  Walks (proc_pids, proc_maps, proc_fds,
 * proc_children) call fn once per entry; fn returns 0 to go on, anything
 * else stops the walk and becomes its return value.
 */
#ifndef HEAPPROF_UTIL_PROC_H
#define HEAPPROF_UTIL_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- one process: pid ---------------------------------------------- */

/* /proc/PID/stat: the fields after the command name, which may hold
 * spaces and parentheses (parsed from the last ')'). */
struct proc_stat {
	char state;          /* field 3: R, S, D, Z (zombie), X (dead)... */
	pid_t ppid;          /* field 4 */
	unsigned flags;      /* field 9: PF_* (0x4 PF_EXITING) */
	uint64_t start_time; /* field 22: clock ticks after boot; with the pid
	                        it names one process across pid reuse */
};
int proc_stat(pid_t pid, struct proc_stat *st);
/* Its start_time, or 0 when pid cannot be read: with the pid, a process's
 * identity (a pid reused by a new process has another). */
uint64_t proc_start_time(pid_t pid);
/* Whether pid runs: its stat is there and it is no zombie (Z, X). */
bool proc_alive(pid_t pid);
/* Whether pid is gone or on its way out: no stat, a zombie, or exiting
 * (PF_EXITING: its descriptors may already be closed while it is not a
 * zombie yet). */
bool proc_exiting(pid_t pid);
/* The parent's pid from stat, or -1 (errno set) if unknown. */
pid_t proc_ppid(pid_t pid);

/* /proc/PID/status, the lines callers use; have says which were there. */
enum {
	PROC_HAVE_UID = 1 << 0, /* Uid: with its four values */
	PROC_HAVE_RSS = 1 << 1, /* VmRSS: (a zombie has none) */
	PROC_HAVE_HWM = 1 << 2, /* VmHWM: */
	PROC_HAVE_GID = 1 << 3, /* Gid: with its four values */
};
struct proc_status {
	unsigned have;      /* PROC_HAVE_* */
	char name[64];      /* Name: comm, escaped by the kernel */
	char state;         /* State: its letter */
	pid_t ppid;         /* PPid: */
	uid_t uid[4];       /* Uid: real, effective, saved, filesystem */
	gid_t gid[4];       /* Gid: the same four */
	pid_t tracer;       /* TracerPid: (0: not traced) */
	int seccomp_mode;   /* Seccomp: 0 off, 1 strict, 2 filter */
	uint64_t sigcgt;    /* SigCgt: bit n-1 set: signal n is caught */
	uint64_t sigpnd;    /* SigPnd: pending for this thread */
	uint64_t shdpnd;    /* ShdPnd: pending for the process */
	uint64_t sigblk;    /* SigBlk: blocked now (in sigsuspend, ppoll...:
	                       the call's temporary mask) */
	long seccomp;       /* Seccomp_filters: (0 if none or unknown) */
	uint64_t rss;       /* VmRSS:, bytes */
	uint64_t rss_anon;  /* RssAnon:, bytes (0 if not shown) */
	uint64_t rss_file;  /* RssFile: */
	uint64_t rss_shmem; /* RssShmem: */
	uint64_t rss_peak;  /* VmHWM: */
};
int proc_status(pid_t pid, struct proc_status *st);

/* The owner of /proc/PID: the process's effective uid (root for a process
 * that is not dumpable). */
int proc_owner(pid_t pid, uid_t *uid);

/* /proc/PID/comm without its newline, into buf; "" if gone. */
void proc_comm(pid_t pid, char *buf, size_t len);
/* /proc/PID/cmdline, arguments joined by spaces (the first 4 KiB);
 * malloc'd, "" if gone, NULL only when out of memory. */
char *proc_cmdline(pid_t pid);
/* argv[0]: cmdline up to its first NUL, into buf ("" and -1 if gone). */
int proc_argv0(pid_t pid, char *buf, size_t len);
/* The targets of /proc/PID/exe and /proc/PID/cwd, cut to len - 1 bytes
 * ("" and -1 if unreadable: gone, a zombie, or not ours). */
int proc_exe(pid_t pid, char *buf, size_t len);
int proc_cwd(pid_t pid, char *buf, size_t len);

/* ---- walks --------------------------------------------------------- */

/* One line of /proc/PID/maps. */
struct proc_map {
	uint64_t start, end;
	char perms[8]; /* "r-xp" */
	uint64_t offset;
	unsigned long inode;
	/* What follows the inode: a file's path (with " (deleted)" when it
	 * was), "[heap]", "[stack]"..., or "" for an anonymous mapping. */
	const char *path;
};
/* Every mapping, in address order.  -1 with errno if the file cannot be
 * opened (EACCES: not ours to trace), EIO if reading it failed part way
 * (some kernels refuse at read time, not at open). */
int proc_maps(pid_t pid, int (*fn)(void *ctx, const struct proc_map *m),
              void *ctx);

/* One entry of /proc/PID/fd. */
struct proc_fd {
	int fd;             /* its number in the process */
	const char *target; /* what it leads to ("/path", "pipe:[12]",
	                       "/memfd:NAME (deleted)"); NULL if unreadable */
	int err;            /* then readlink's errno (EACCES, EPERM...) */
	int dirfd;          /* /proc/PID/fd, open while fn runs */
	const char *name;   /* the entry's name in it */
};
/* Every descriptor of pid.  -1 with errno if the directory cannot be
 * opened (ENOENT: no such process; EACCES or EPERM: not ours). */
int proc_fds(pid_t pid, int (*fn)(void *ctx, const struct proc_fd *f),
             void *ctx);
/* Opens the file behind f anew, through /proc (a new open file of it, as
 * open(2) with flags would make): only from inside fn.  An fd or -1. */
int proc_fd_open(const struct proc_fd *f, int flags);

/* Every process in /proc (not its threads), in directory order. */
int proc_pids(int (*fn)(void *ctx, pid_t pid), void *ctx);
/* The children of pid, from /proc/PID/task/TID/children of each of its
 * threads; -1 with ENOENT when no thread has that file (a kernel
 * without it: then walk proc_pids and compare proc_stat's ppid). */
int proc_children(pid_t pid, int (*fn)(void *ctx, pid_t child), void *ctx);

/* Every thread of pid (the names in /proc/PID/task), in directory
 * order; -1 with errno if the directory cannot be opened. */
int proc_tasks(pid_t pid, int (*fn)(void *ctx, pid_t tid), void *ctx);

/* The system call thread tid of pid is blocked in, from
 * /proc/PID/task/TID/syscall: its number, or -1 when it runs in user
 * space ("running"); -2 on error (errno set; EACCES: not ours). */
long proc_task_syscall(pid_t pid, pid_t tid);
/* /proc/PID/task/TID/FILE into buf (NUL-terminated, at most len - 1
 * bytes): the bytes read, or -1 if it cannot be opened. */
ssize_t proc_task_read(pid_t pid, pid_t tid, const char *file, char *buf,
                       size_t len);

/* ---- by name -------------------------------------------------------- */

/* Whether name names a process whose argv[0] and comm are these: argv[0]
 * itself, its basename, or comm ("" for one not read: never matches). */
bool proc_name_matches(const char *name, const char *argv0, const char *comm);
/* Every process but ours that name names (proc_name_matches), into
 * pids[0..max); returns how many there are (more than max if they did
 * not fit), or -1 with errno if /proc cannot be read. */
int proc_find_by_name(const char *name, pid_t *pids, size_t max);

#endif
