/*
 * The summary `heapprof record` prints on a terminal when it ends
 * (record_summary.c).
 */
#ifndef HEAPPROF_CLI_RECORD_SUMMARY_H
#define HEAPPROF_CLI_RECORD_SUMMARY_H

/* A few lines on stderr about the profile at path, read back from it. */
void record_summary(const char *path);

#endif
