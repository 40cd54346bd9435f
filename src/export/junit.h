/*
 * JUnit XML, the test-report format CI systems read (Jenkins, GitLab,
 * GitHub's test reporters): one testsuite of testcases, each with its
 * measured numbers as properties (so a CI can chart them), its verdict
 * line in system-out, and a failure element when it failed.  Written by
 * `heapprof check --junit`.
 */
#ifndef HEAPPROF_EXPORT_JUNIT_H
#define HEAPPROF_EXPORT_JUNIT_H

#include <stddef.h>

#define JUNIT_PROPS_MAX 8

struct junit_case {
	const char *name; /* the testcase's name */
	const char *out;  /* its line: system-out, and the failure's message */
	int fail;
	size_t nprop;
	struct {
		const char *name;
		double v; /* written with 17 digits: read back exactly */
	} prop[JUNIT_PROPS_MAX];
};

/* Write the n cases to path as testsuite `suite`, classname `cls`.  0, or
 * -1 with "heapprof: <subsys>: PATH: why" printed. */
int junit_write(const char *path, const char *suite, const char *cls,
                const struct junit_case *c, size_t n, const char *subsys);

#endif
