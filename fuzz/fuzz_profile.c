/*
 * The profile reader: every command that reads a profile file gets bytes
 * that may be truncated, corrupted or foreign.
 *
 * Byte 0 picks the command, the rest is the file.  The bytes are written
 * to a file in a private directory (/dev/shm when it exists; SQLite
 * resolves /proc/self/fd links, so a memfd cannot be opened by name) that
 * the command opens, so the real path runs: rd_open's checks (a SQLite
 * database, the heapprof tables, the format version), the stack tables loaded
 * into memory (ids that dangle, parent chains that loop), then the command's
 * own queries and output: `report` in several views and dumps, `report --pid`,
 * `pprof -o` (protobuf export), `flamegraph -o` (HTML page) and `diff --dumps`.
 * Output goes to /dev/null; the one-line errors too.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli/commands.h"
#include "fuzz_common.h"

static int mfd = -1;
static char *path;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	path = fuzz_scratch_file("profile");
	mfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (mfd < 0)
		abort();
	/* The commands print to stdout and stderr; libFuzzer keeps its own
	 * FILE for its lines, ASan writes to fd 2 directly. */
	if (!freopen("/dev/null", "w", stdout))
		abort();
	fuzz_quiet_stderr();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t how = data[0];
	if (ftruncate(mfd, 0) ||
	    pwrite(mfd, data + 1, size - 1, 0) != (ssize_t)(size - 1))
		abort();
	char *av[8];
	int ac = 0;
	switch (how % 8) {
	case 0:
	case 1:
		av[ac++] = "report";
		av[ac++] = path;
		break;
	case 2:
		av[ac++] = "report";
		av[ac++] = path;
		av[ac++] = "--view";
		av[ac++] = (how & 8) ? "alloc_objects" : "alloc_space";
		av[ac++] = "--dump";
		av[ac++] = (how & 16) ? "1" : "-1";
		break;
	case 3:
		av[ac++] = "report";
		av[ac++] = path;
		av[ac++] = "--pid";
		av[ac++] = "1";
		break;
	case 4:
		av[ac++] = "pprof";
		av[ac++] = path;
		av[ac++] = "-o";
		av[ac++] = "/dev/null";
		if (how & 8)
			av[ac++] = "--all";
		break;
	case 5:
		av[ac++] = "flamegraph";
		av[ac++] = path;
		av[ac++] = "-o";
		av[ac++] = "/dev/null";
		break;
	default:
		av[ac++] = "diff";
		av[ac++] = path;
		av[ac++] = "--dumps";
		av[ac++] = "1,2";
		break;
	}
	av[ac] = NULL;
	switch (how % 8) {
	case 4:
		cmd_pprof(ac, av);
		break;
	case 5:
		cmd_flamegraph(ac, av);
		break;
	case 6:
	case 7:
		cmd_diff(ac, av);
		break;
	default:
		cmd_report(ac, av);
		break;
	}
	return 0;
}
