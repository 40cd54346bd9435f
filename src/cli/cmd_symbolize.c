/* Work in progress (issue 3): replaced by the real command. */
#include <stdio.h>
#include "cli/commands.h"
int cmd_symbolize(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fputs("heapprof: symbolize: not built yet\n", stderr);
	return 2;
}
