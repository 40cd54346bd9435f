/*
 * fdcheck PATH...: for test_security.sh, what a descriptor (a
 * /proc/PID/fd/N link) is: "PATH mode OCTAL seals LIST" where LIST names
 * the memfd seals set (shrink, grow, write, seal; "none").  Opening the
 * link needs the same access as ptrace-reading the process.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int rc = 0;
	for (int i = 1; i < argc; i++) {
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
		struct stat sb;
		if (fd < 0 || fstat(fd, &sb) != 0) {
			printf("%s cannot open\n", argv[i]);
			rc = 1;
			continue;
		}
		int s = fcntl(fd, F_GET_SEALS);
		printf("%s mode %o seals", argv[i],
		       (unsigned)(sb.st_mode & 07777));
		if (s <= 0)
			printf(" none");
		if (s > 0 && (s & F_SEAL_SHRINK))
			printf(" shrink");
		if (s > 0 && (s & F_SEAL_GROW))
			printf(" grow");
		if (s > 0 && (s & F_SEAL_WRITE))
			printf(" write");
		if (s > 0 && (s & F_SEAL_SEAL))
			printf(" seal");
		printf("\n");
		close(fd);
	}
	return rc;
}
