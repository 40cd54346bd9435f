/* `heapprof record` as a child of top and serve (record_child.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "agent/record_child.h"
#include "util/err.h"

pid_t record_child_start(const char *subsys, char *const argv[],
                         const char *log)
{
	fflush(stdout);
	fflush(stderr);
	pid_t me = getpid();
	pid_t child = fork();
	if (child < 0) {
		hp_err(subsys, "fork: %s", strerror(errno));
		return -1;
	}
	if (child)
		return child;
	setpgid(0, 0);
	/* the parent killed (SIGKILL): the session ends all the same */
	if (prctl(PR_SET_PDEATHSIG, SIGINT) < 0 || getppid() != me)
		_exit(127);
	int in = open("/dev/null", O_RDONLY);
	int out = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (in < 0 || out < 0)
		_exit(127);
	dup2(in, STDIN_FILENO);
	dup2(out, STDOUT_FILENO);
	dup2(out, STDERR_FILENO);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	execv("/proc/self/exe", argv);
	hp_log("heapprof: %s: running heapprof record: %s\n", subsys,
	       strerror(errno));
	_exit(127);
}

const char *record_child_last_line(const char *log, char *buf, size_t len)
{
	FILE *f = fopen(log, "re");
	char line[1024];
	buf[0] = '\0';
	while (f && fgets(line, sizeof(line), f))
		if (line[0] != '\n')
			snprintf(buf, len, "%s", line);
	if (f)
		fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	if (!buf[0])
		snprintf(buf, len, "no message");
	return buf;
}
