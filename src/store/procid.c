/*
 * How every command names a process of a profile (procid.h).
 */
#include <stdio.h>

#include "store/procid.h"

void procid_nth(const struct rd_process *procs, size_t n, size_t i, long *nth,
                long *count)
{
	*nth = 0;
	*count = 0;
	for (size_t k = 0; k < n; k++) {
		if (procs[k].pid != procs[i].pid)
			continue;
		++*count;
		if (k <= i)
			++*nth;
	}
}

void procid_format(const struct rd_process *procs, size_t n, size_t i,
                   char *buf, size_t len)
{
	long nth, count;
	procid_nth(procs, n, i, &nth, &count);
	if (count > 1)
		snprintf(buf, len, "%lld.%ld", (long long)procs[i].pid, nth);
	else
		snprintf(buf, len, "%lld", (long long)procs[i].pid);
}
