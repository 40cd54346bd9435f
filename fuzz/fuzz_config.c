/*
 * The config reader (src/config/read.c): `heapprof record -c FILE`
 * parses text a user (or anyone who can write the file) gave it.
 *
 * The input is the file.  config_read parses it into a session (the
 * defaults first, as record does), config_check applies the cross-field
 * rules.  Two properties are checked, beyond "no crash, no leak, no
 * undefined behaviour": an error is reported (a non-zero return) without
 * a half-read session escaping, and a config that was read and passed
 * config_check prints (config_print) as a text that config_read reads
 * back to an equal session (config_equal), as docs/CONFIG.md promises.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* One-line errors on every bad input: not for the fuzzer's log. */
	fuzz_quiet_stderr();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0;
	if (size == 0) {
		fclose(f);
		f = fopen("/dev/null", "r");
		if (!f)
			return 0;
	}
	struct session_config c;
	config_defaults(&c);
	int rc = config_read(&c, f, "fuzz.cfg");
	fclose(f);
	if (rc == 0 && config_check(&c) == 0) {
		char *text = NULL;
		size_t tlen = 0;
		FILE *o = open_memstream(&text, &tlen);
		if (!o)
			abort();
		config_print(&c, o);
		fclose(o);
		struct session_config back;
		config_defaults(&back);
		FILE *in = fmemopen(text, tlen ? tlen : 1, "r");
		if (!in)
			abort();
		int rc2 = config_read(&back, in, "printed");
		fclose(in);
		if (rc2 != 0 || !config_equal(&c, &back)) {
			fprintf(stdout,
			        "config_print does not read back:\n%s\n", text);
			abort();
		}
		config_free(&back);
		free(text);
	}
	config_free(&c);
	return 0;
}
