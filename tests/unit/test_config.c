/*
 * Unit tests of the session config (src/config/*.c): every field
 * read from text, the print/read round trip, each read error's exact
 * message (file, line, field, reason), and the cross-field rules of
 * config_check; the size parser the byte fields share with the command
 * line (hp_parse_size, src/util/size.c) and the "did you mean" matcher
 * (hp_suggest).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "cli/options.h"
#include "util/args.h"
#include "util/size.h"
#include "util/suggest.h"
#include "unit.h"

static char errbuf[4096];

/* Run config_read on text with stderr captured into errbuf. */
static int read_text(struct session_config *c, const char *text)
{
	FILE *in = fmemopen((void *)text, strlen(text), "r");
	FILE *cap = tmpfile();
	int saved = dup(2);

	if (!in || !cap || saved < 0) {
		fprintf(stderr, "test setup failed\n");
		return -2;
	}
	fflush(stderr);
	dup2(fileno(cap), 2);
	int rc = config_read(c, in, "t.cfg");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	fclose(in);
	rewind(cap);
	size_t n = fread(errbuf, 1, sizeof(errbuf) - 1, cap);
	errbuf[n] = '\0';
	fclose(cap);
	return rc;
}

/* config_check with stderr captured into errbuf. */
static int check(const struct session_config *c)
{
	FILE *cap = tmpfile();
	int saved = dup(2);

	fflush(stderr);
	dup2(fileno(cap), 2);
	int rc = config_check(c);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(cap);
	size_t n = fread(errbuf, 1, sizeof(errbuf) - 1, cap);
	errbuf[n] = '\0';
	fclose(cap);
	return rc;
}

/* Exactly one line on stderr. */
static int one_line(void)
{
	size_t n = strlen(errbuf);
	return n > 0 && errbuf[n - 1] == '\n' &&
	       strchr(errbuf, '\n') == errbuf + n - 1;
}

static char *print_to_string(const struct session_config *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	config_print(c, f);
	fclose(f);
	return buf;
}

static void test_defaults(void)
{
	struct session_config c;

	config_defaults(&c);
	CHECK_EQ_U64(c.interval, 4096);
	CHECK_EQ_U64(c.unwind_mode, HP_UNWIND_DWARF);
	CHECK_EQ_U64(c.max_frames, 64);
	CHECK_EQ_U64(c.block_timeout_ms, 1000);
	CHECK_EQ_U64(c.adaptive_threshold_pct, 90);
	CHECK(c.argv == NULL && c.npids == 0 && c.nnames == 0);
	char *s = print_to_string(&c);
	CHECK(s && !strcmp(s, "sampling_interval_bytes: 4096\n"));
	free(s);
	config_free(&c);
}

static const char full_text[] =
        "# a session by name\n"
        "sampling_interval_bytes: 1\n"
        "pid: 123 pid: 456\n"
        "process_cmdline: \"server\"\n"
        "process_cmdline: \"a \\\"quoted\\\" \\\\ name\"\n"
        "no_startup: false\n"
        "no_running: true   # only new ones\n"
        "shmem_size_bytes: 8388608\n"
        "block_client: true\n"
        "block_client_timeout_us: 2500\n"
        "dump_at_max: true\n"
        "continuous_dump_config {\n"
        "  dump_phase_ms: 100\n"
        "  dump_interval_ms: 500\n"
        "}\n"
        "heaps: \"libc.malloc\", heaps: \"pool\";\n"
        "heap_sampling_intervals: 4096\n"
        "heap_sampling_intervals: 1\n"
        "adaptive_sampling_shmem_threshold: 0.75\n"
        "adaptive_sampling_max_sampling_interval_bytes: 65536\n"
        "unwind: \"fp\"\n"
        "max_frames: 128\n"
        "duration_ms: 2000\n"
        "output: \"out.db\"\n"
        "follow_fork: true\n"
        "follow_exec: true\n"
        "trace_mode: ring trace_buffer_bytes: 1048576\n"
        "\n";

static void test_read_all_fields(void)
{
	struct session_config c;

	config_defaults(&c);
	CHECK(read_text(&c, full_text) == 0);
	CHECK(errbuf[0] == '\0');
	CHECK_EQ_U64(c.interval, 1);
	CHECK_EQ_U64(c.npids, 2);
	CHECK_EQ_U64(c.pids[0], 123);
	CHECK_EQ_U64(c.pids[1], 456);
	CHECK_EQ_U64(c.nnames, 2);
	CHECK(c.nnames == 2 && !strcmp(c.names[0], "server") &&
	      !strcmp(c.names[1], "a \"quoted\" \\ name"));
	CHECK(!c.no_startup && c.no_running);
	CHECK_EQ_U64(c.shmem_size, 8 << 20);
	CHECK(c.block_client);
	CHECK_EQ_U64(c.block_timeout_ms, 3); /* 2500 us, rounded up */
	CHECK(c.dump_at_max);
	CHECK_EQ_U64(c.dump_phase_ms, 100);
	CHECK_EQ_U64(c.dump_interval_ms, 500);
	CHECK(c.nheaps == 2 && !strcmp(c.heaps[0], "libc.malloc") &&
	      !strcmp(c.heaps[1], "pool"));
	CHECK(c.nheap_intervals == 2 && c.heap_intervals[0] == 4096 &&
	      c.heap_intervals[1] == 1);
	CHECK(c.adaptive);
	CHECK_EQ_U64(c.adaptive_threshold_pct, 75);
	CHECK_EQ_U64(c.adaptive_max_interval, 65536);
	CHECK_EQ_U64(c.unwind_mode, HP_UNWIND_FP);
	CHECK_EQ_U64(c.max_frames, 128);
	CHECK_EQ_U64(c.duration_ms, 2000);
	CHECK(c.output && !strcmp(c.output, "out.db"));
	CHECK(c.follow_fork && c.follow_exec);
	CHECK_EQ_U64(c.trace_mode, HP_TRACE_RING);
	CHECK_EQ_U64(c.trace_bytes, 1 << 20);
	CHECK(c.argv == NULL);
	CHECK(config_check(&c) == 0);
	config_free(&c);
}

static void test_read_command_and_block_forms(void)
{
	struct session_config c;

	config_defaults(&c);
	CHECK(read_text(&c, "command: \"/bin/echo\" command: \"\"\n"
	                    "command: \"two\\nlines\\t\"\n"
	                    "continuous_dump_config: { dump_interval_ms: 10 }\n"
	                    "unwind: dwarf all_heaps: true\n"
	                    "exclude_heaps: \"arena\"\n") == 0);
	CHECK(c.argv && c.argv[0] && !strcmp(c.argv[0], "/bin/echo") &&
	      c.argv[1] && !strcmp(c.argv[1], "") && c.argv[2] &&
	      !strcmp(c.argv[2], "two\nlines\t") && !c.argv[3]);
	CHECK_EQ_U64(c.dump_interval_ms, 10);
	CHECK_EQ_U64(c.dump_phase_ms, 0);
	CHECK(c.all_heaps && c.nexclude_heaps == 1);
	CHECK(config_check(&c) == 0);
	/* The trace's mode quoted or not; the buffer keeps its default. */
	CHECK(read_text(&c, "trace_mode: \"oneshot\"") == 0);
	CHECK_EQ_U64(c.trace_mode, HP_TRACE_ONESHOT);
	CHECK_EQ_U64(c.trace_bytes, 0);
	CHECK(config_check(&c) == 0);
	/* A second file's command replaces the first's argv. */
	CHECK(read_text(&c, "command: \"true\"") == 0);
	CHECK(c.argv && !strcmp(c.argv[0], "true") && !c.argv[1]);
	config_free(&c);
	CHECK(c.argv == NULL);

	/* An empty file and a comment-only file change nothing. */
	struct session_config d, e;
	config_defaults(&d);
	config_defaults(&e);
	CHECK(read_text(&d, "") == 0);
	CHECK(read_text(&d, "# nothing\n\n   # at all") == 0);
	CHECK(config_equal(&d, &e));
}

/* print, read back, compare; and printing is stable. */
static void round_trip(const struct session_config *c, const char *what)
{
	char *s = print_to_string(c);
	struct session_config back;

	config_defaults(&back);
	int rc = read_text(&back, s ? s : "");
	CHECK(rc == 0);
	if (rc != 0)
		fprintf(stderr, "  %s: %s\n%s", what, errbuf, s);
	CHECK(config_equal(c, &back));
	char *s2 = print_to_string(&back);
	CHECK(s && s2 && !strcmp(s, s2));
	if (!config_equal(c, &back))
		fprintf(stderr,
		        "  %s: differs after the round trip:\n%s---\n%s", what,
		        s, s2);
	free(s);
	free(s2);
	config_free(&back);
}

static void test_round_trip(void)
{
	struct session_config c;

	config_defaults(&c);
	round_trip(&c, "defaults");

	CHECK(read_text(&c, full_text) == 0);
	round_trip(&c, "full");
	config_free(&c);

	/* Command-line style: argv not owned, odd strings. */
	static char *argv[] = {
	        "./prog", "arg with \"quotes\"", "back\\slash",     "new\nline",
	        "",       "tab\there",           "cr\rctl\x01\x7f", NULL};
	config_defaults(&c);
	c.argv = argv;
	c.interval = 1ull << 40;
	c.max_frames = 1;
	c.output = "dir/x \"y\".db";
	c.adaptive = true;
	c.adaptive_threshold_pct = 1;
	c.block_client = true;
	c.block_timeout_ms = CFG_BLOCK_TIMEOUT_MAX_MS;
	c.dump_phase_ms = 7;
	c.dump_interval_ms = 1000;
	c.all_heaps = true;
	c.trace_mode = HP_TRACE_STREAMING;
	c.trace_bytes = HP_TRACE_MAX_BYTES;
	CHECK(config_add_exclude_heap(&c, "x") == NULL);
	round_trip(&c, "command");
	config_free(&c);
	CHECK(c.argv == argv); /* not ours: left alone */

	config_defaults(&c);
	for (int i = 1; i <= CFG_MAX_PIDS; i++)
		CHECK(config_add_pid(&c, i * 7) == NULL);
	CHECK(config_add_pid(&c, 5) != NULL); /* 1025th */
	for (int i = 0; i < CFG_MAX_NAMES; i++) {
		char n[300];
		memset(n, 'a' + i % 26, 255);
		snprintf(n + 250, 50, "%05d", i);
		CHECK(config_add_name(&c, n) == NULL);
	}
	c.adaptive = true;
	c.adaptive_threshold_pct = 100;
	c.adaptive_max_interval = 1ull << 40;
	round_trip(&c, "many targets");
	config_free(&c);

	/* Each adaptive percentage survives the text form. */
	for (uint32_t pct = 1; pct <= 100; pct++) {
		config_defaults(&c);
		c.adaptive = true;
		c.adaptive_threshold_pct = pct;
		char *s = print_to_string(&c);
		struct session_config back;
		config_defaults(&back);
		CHECK(read_text(&back, s) == 0);
		CHECK_EQ_U64(back.adaptive_threshold_pct, pct);
		free(s);
	}
}

struct bad {
	const char *text;
	const char *msg; /* the whole stderr line, without the newline */
};

static const struct bad bad_cases[] = {
        {"sampling_interval_bytes: abc",
         "config t.cfg:1: field 'sampling_interval_bytes': not a number "
         "('abc')"},
        {"\n\nsampling_interval_bytes: 0",
         "config t.cfg:3: field 'sampling_interval_bytes': too small ('0'): "
         "at least 1"},
        {"sampling_interval_bytes: 1099511627777",
         "config t.cfg:1: field 'sampling_interval_bytes': too large "
         "('1099511627777'): at most 1099511627776"},
        {"sampling_interval_bytes: 99999999999999999999999",
         "config t.cfg:1: field 'sampling_interval_bytes': too large "
         "('99999999999999999999999'): at most 1099511627776"},
        {"sampling_interval_bytes: -5",
         "config t.cfg:1: field 'sampling_interval_bytes': must not be "
         "negative ('-5')"},
        /* A byte field: "abc" is an unknown unit (hp_parse_size). */
        {"sampling_interval_bytes: 12abc",
         "config t.cfg:1: field 'sampling_interval_bytes': unknown unit: "
         "want a number of bytes, optionally with K, M or G (or KiB, MiB, "
         "GiB), multiples of 1024 ('12abc')"},
        {"max_frames: 12abc",
         "config t.cfg:1: field 'max_frames': not a number ('12abc')"},
        {"sampling_interval_bytes: \"4096\"",
         "config t.cfg:1: field 'sampling_interval_bytes': expected a "
         "number, not a string (\"4096\")"},
        {"sampling_interval_bytes: 1\nsampling_interval_bytes: 2",
         "config t.cfg:2: field 'sampling_interval_bytes': given twice "
         "(first on line 1)"},
        {"sampling_interval_bytes 4096",
         "config t.cfg:1: field 'sampling_interval_bytes': expected ':' "
         "after the field name"},
        {"sampling_interval_bytes:",
         "config t.cfg:1: field 'sampling_interval_bytes': missing value at "
         "the end of the file"},
        {"sampling_interval_bytes: }",
         "config t.cfg:1: field 'sampling_interval_bytes': missing value "
         "(found '}')"},
        {"bogus_field: 1",
         "config t.cfg:1: field 'bogus_field': unknown field"},
        {"max_heapprofd_memory_kb: 1",
         "config t.cfg:1: field 'max_heapprofd_memory_kb': unknown field"},
        {"dump_interval_ms: 100",
         "config t.cfg:1: field 'dump_interval_ms': belongs inside "
         "continuous_dump_config { }"},
        {"continuous_dump_config { pid: 1 }",
         "config t.cfg:1: field 'pid': not a field of continuous_dump_config "
         "(only dump_phase_ms and dump_interval_ms)"},
        {"continuous_dump_config {\n dump_interval_ms: 5 }",
         "config t.cfg:2: field 'continuous_dump_config.dump_interval_ms': "
         "too small ('5'): 0 (no continuous dumps) or at least 10"},
        {"continuous_dump_config {\n dump_interval_ms: 500\n",
         "config t.cfg:1: field 'continuous_dump_config': unterminated "
         "block: no '}' before the end of the file"},
        {"continuous_dump_config { dump_phase_ms: 1 dump_phase_ms: 2 }",
         "config t.cfg:1: field 'continuous_dump_config.dump_phase_ms': "
         "given twice (first on line 1)"},
        {"continuous_dump_config { }\ncontinuous_dump_config { }",
         "config t.cfg:2: field 'continuous_dump_config': given twice (first "
         "on line 1)"},
        {"continuous_dump_config dump_phase_ms: 1",
         "config t.cfg:1: field 'continuous_dump_config': expected '{' after "
         "the field name"},
        {"}", "config t.cfg:1: '}' without a block"},
        {"pid: 1\n= 3", "config t.cfg:2: expected a field name, found '='"},
        {"process_cmdline: \"abc", "config t.cfg:1: field 'process_cmdline': "
                                   "unterminated string (a '\"' is missing on "
                                   "this line)"},
        {"process_cmdline: \"ab\ncd\"",
         "config t.cfg:1: field 'process_cmdline': unterminated string (a "
         "'\"' is missing on this line)"},
        {"process_cmdline: \"a\\x4\"",
         "config t.cfg:1: field 'process_cmdline': '\\x' in a string "
         "needs two hex digits"},
        /* a raw control byte: in a string it would reach a name */
        {"pid: 1\nheaps: \"a\x01"
         "b\"",
         "config t.cfg:2: a control byte (\\x01): not a text config"},
        {"process_cmdline: \"a\\qb\"",
         "config t.cfg:1: field 'process_cmdline': unknown escape '\\q' in a "
         "string (use \\\" \\\\ \\n \\t \\r \\xNN)"},
        {"process_cmdline: server",
         "config t.cfg:1: field 'process_cmdline': expected a string in "
         "double quotes ('server')"},
        {"process_cmdline: 'server'",
         "config t.cfg:1: field 'process_cmdline': strings are written in "
         "double quotes"},
        {"process_cmdline: \"\"",
         "config t.cfg:1: field 'process_cmdline': empty (\"\")"},
        {"process_cmdline: \"x\" process_cmdline: \"x\"",
         "config t.cfg:1: field 'process_cmdline': given twice (\"x\")"},
        {"pid: 0", "config t.cfg:1: field 'pid': too small ('0'): at least 1"},
        {"pid: 4194305",
         "config t.cfg:1: field 'pid': too large ('4194305'): at most "
         "4194304"},
        {"pid: 7\n\npid: 7", "config t.cfg:3: field 'pid': given twice ('7')"},
        {"no_startup: yes",
         "config t.cfg:1: field 'no_startup': expected true or false "
         "('yes')"},
        {"no_startup: \"true\"",
         "config t.cfg:1: field 'no_startup': expected true or false "
         "('true')"},
        {"shmem_size_bytes: 1048575",
         "config t.cfg:1: field 'shmem_size_bytes': too small ('1048575'): "
         "at least 1048576"},
        {"block_client_timeout_us: 0",
         "config t.cfg:1: field 'block_client_timeout_us': too small ('0'): "
         "at least 1"},
        {"block_client_timeout_us: 60000001",
         "config t.cfg:1: field 'block_client_timeout_us': too large "
         "('60000001'): at most 60000000"},
        {"max_frames: 257",
         "config t.cfg:1: field 'max_frames': too large ('257'): at most "
         "256"},
        {"unwind: \"lbr\"",
         "config t.cfg:1: field 'unwind': expected \"dwarf\" or \"fp\" "
         "('lbr')"},
        {"adaptive_sampling_shmem_threshold: 0",
         "config t.cfg:1: field 'adaptive_sampling_shmem_threshold': out of "
         "range ('0'): a fraction of the tables, greater than 0 and at most "
         "1"},
        {"adaptive_sampling_shmem_threshold: 1.5",
         "config t.cfg:1: field 'adaptive_sampling_shmem_threshold': out of "
         "range ('1.5'): a fraction of the tables, greater than 0 and at most "
         "1"},
        {"adaptive_sampling_shmem_threshold: 0.001",
         "config t.cfg:1: field 'adaptive_sampling_shmem_threshold': too "
         "small ('0.001'): the resolution is 0.01 (1%)"},
        {"adaptive_sampling_shmem_threshold: nan",
         "config t.cfg:1: field 'adaptive_sampling_shmem_threshold': not a "
         "number ('nan')"},
        {"heaps: \"a\"\nheap_sampling_intervals: 1\n"
         "heap_sampling_intervals: 2",
         "config t.cfg:2: field 'heap_sampling_intervals': 2 given for 1 "
         "heap: one per `heaps` entry, in the same order"},
        {"heaps: \"0123456789012345678901234567890123456789012345678901234567"
         "89abcd\"",
         "config t.cfg:1: field 'heaps': too long: heap names are at most 63 "
         "bytes (\"0123456789012345678901234567890123456789...\")"},
        {"output: \"\"", "config t.cfg:1: field 'output': empty"},
        {"duration_ms: 8640000001",
         "config t.cfg:1: field 'duration_ms': too large ('8640000001'): "
         "at most 8640000000"},
        {"trace_mode: circular",
         "config t.cfg:1: field 'trace_mode': expected \"streaming\", "
         "\"oneshot\" or \"ring\" ('circular')"},
        {"trace_buffer_bytes: 65535",
         "config t.cfg:1: field 'trace_buffer_bytes': too small ('65535'): "
         "at least 65536"},
        {"trace_buffer_bytes: 17179869185",
         "config t.cfg:1: field 'trace_buffer_bytes': too large "
         "('17179869185'): at most 17179869184"},
};

static void test_read_errors(void)
{
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		struct session_config c;
		char want[1024];
		config_defaults(&c);
		int rc = read_text(&c, bad_cases[i].text);
		snprintf(want, sizeof(want), "heapprof: record: %s\n",
		         bad_cases[i].msg);
		CHECK(rc == -1);
		if (strcmp(errbuf, want)) {
			fprintf(stderr, "  case %zu: got  %s  want %s", i,
			        errbuf, want);
			unit_failed_checks++;
		}
		config_free(&c);
	}

	/* Too many of a repeatable field. */
	struct session_config c;
	char *text = malloc(70 * 32);
	size_t o = 0;
	for (int i = 0; i < 65; i++)
		o += (size_t)sprintf(text + o, "heaps: \"h%d\"\n", i);
	config_defaults(&c);
	CHECK(read_text(&c, text) == -1);
	CHECK(!strcmp(errbuf,
	              "heapprof: record: config t.cfg:65: field "
	              "'heaps': too many heaps: at most 64 (\"h64\")\n"));
	config_free(&c);
	free(text);

	char name[300];
	memset(name, 'n', 256);
	name[256] = '\0';
	char line[400];
	snprintf(line, sizeof(line), "process_cmdline: \"%s\"", name);
	config_defaults(&c);
	CHECK(read_text(&c, line) == -1);
	CHECK(strstr(errbuf, "field 'process_cmdline': too long: at most 255 "
	                     "bytes") != NULL);
	CHECK(one_line());
	config_free(&c);
	name[255] = '\0';
	snprintf(line, sizeof(line), "process_cmdline: \"%s\"", name);
	config_defaults(&c);
	CHECK(read_text(&c, line) == 0);
	config_free(&c);

	/* A NUL byte: a binary, not a config. */
	static const char withnul[] = "pid: 1\n\0pid: 2";
	FILE *in = fmemopen((void *)withnul, sizeof(withnul) - 1, "r");
	FILE *cap = tmpfile();
	int saved = dup(2);
	fflush(stderr);
	dup2(fileno(cap), 2);
	config_defaults(&c);
	CHECK(config_read(&c, in, "bin") == -1);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(cap);
	size_t n = fread(errbuf, 1, sizeof(errbuf) - 1, cap);
	errbuf[n] = '\0';
	fclose(cap);
	fclose(in);
	CHECK(!strcmp(errbuf, "heapprof: record: config bin:2: a NUL byte: "
	                      "not a text config\n"));
	config_free(&c);
}

/* A config that passes config_check: a command. */
static void base(struct session_config *c)
{
	static char *argv[] = {"prog", NULL};
	config_defaults(c);
	c->argv = argv;
}

struct check_case {
	const char *text;  /* read on top of defaults (no command) */
	int with_command;  /* then set argv = {"prog"} */
	const char *field; /* "field 'F'" expected in the message, NULL = ok */
};

static const struct check_case check_cases[] = {
        {"", 1, NULL},
        {"", 0, "command"},
        {"pid: 1", 0, NULL},
        {"process_cmdline: \"x\"", 0, NULL},
        {"pid: 1", 1, "pid"},
        {"process_cmdline: \"x\"", 1, "process_cmdline"},
        {"no_startup: true", 1, "no_startup"},
        {"pid: 1 no_running: true", 0, "no_running"},
        {"process_cmdline: \"x\" no_startup: true", 0, NULL},
        {"process_cmdline: \"x\" no_running: true", 0, NULL},
        {"process_cmdline: \"x\" no_startup: true no_running: true", 0,
         "no_running"},
        {"process_cmdline: \"x\" pid: 3 no_startup: true no_running: true", 0,
         NULL},
        {"follow_fork: true follow_exec: true", 1, NULL},
        {"pid: 1 follow_fork: true", 0, NULL},
        {"continuous_dump_config { dump_phase_ms: 5 }", 1,
         "continuous_dump_config.dump_phase_ms"},
        {"continuous_dump_config { dump_phase_ms: 5 dump_interval_ms: 10 }", 1,
         NULL},
        {"block_client_timeout_us: 5000", 1, "block_client_timeout_us"},
        {"block_client: true block_client_timeout_us: 5000", 1, NULL},
        {"adaptive_sampling_max_sampling_interval_bytes: 65536", 1,
         "adaptive_sampling_max_sampling_interval_bytes"},
        {"adaptive_sampling_shmem_threshold: 0.5 "
         "adaptive_sampling_max_sampling_interval_bytes: 65536",
         1, NULL},
        {"sampling_interval_bytes: 100000 "
         "adaptive_sampling_shmem_threshold: 0.5 "
         "adaptive_sampling_max_sampling_interval_bytes: 65536",
         1, "adaptive_sampling_max_sampling_interval_bytes"},
        {"heaps: \"a\" all_heaps: true", 1, "all_heaps"},
        {"exclude_heaps: \"a\"", 1, "exclude_heaps"},
        {"all_heaps: true exclude_heaps: \"a\"", 1, NULL},
        {"heaps: \"a\" heaps: \"b\" heap_sampling_intervals: 1 "
         "heap_sampling_intervals: 8",
         1, NULL},
        {"dump_at_max: true duration_ms: 1000", 1, NULL},
};

static void test_check(void)
{
	for (size_t i = 0; i < sizeof(check_cases) / sizeof(check_cases[0]);
	     i++) {
		const struct check_case *k = &check_cases[i];
		struct session_config c;
		config_defaults(&c);
		if (k->with_command)
			base(&c);
		if (read_text(&c, k->text) != 0) {
			fprintf(stderr, "  check case %zu: read failed: %s", i,
			        errbuf);
			unit_failed_checks++;
			config_free(&c);
			continue;
		}
		int rc = check(&c);
		char want[128];
		snprintf(want, sizeof(want), "heapprof: record: field '%s' (",
		         k->field ? k->field : "");
		if (k->field ? (rc != -1 ||
		                strncmp(errbuf, want, strlen(want)) ||
		                !one_line())
		             : (rc != 0 || errbuf[0])) {
			fprintf(stderr, "  check case %zu (%s): rc %d, '%s'\n",
			        i, k->text, rc, errbuf);
			unit_failed_checks++;
		}
		config_free(&c);
	}

	/* Values set directly (from the command line) are checked too. */
	struct session_config c;
	base(&c);
	c.interval = 0;
	CHECK(check(&c) == -1 && strstr(errbuf, "'sampling_interval_bytes'"));
	base(&c);
	c.max_frames = 300;
	CHECK(check(&c) == -1 && strstr(errbuf, "'max_frames'"));
	base(&c);
	c.shmem_size = 4096;
	CHECK(check(&c) == -1 && strstr(errbuf, "'shmem_size_bytes'"));
	base(&c);
	c.dump_interval_ms = 3;
	CHECK(check(&c) == -1 &&
	      strstr(errbuf, "'continuous_dump_config.dump_interval_ms'"));
	base(&c);
	c.duration_ms = CFG_MS_MAX + 1;
	CHECK(check(&c) == -1 && strstr(errbuf, "'duration_ms'"));
	base(&c);
	c.block_client = true;
	c.block_timeout_ms = 0;
	CHECK(check(&c) == -1 && strstr(errbuf, "'block_client_timeout_us'"));
	base(&c);
	c.output = "";
	CHECK(check(&c) == -1 && strstr(errbuf, "'output'"));
	base(&c);
	c.adaptive = true;
	c.adaptive_threshold_pct = 0;
	CHECK(check(&c) == -1 &&
	      strstr(errbuf, "'adaptive_sampling_shmem_threshold'"));
	base(&c);
	c.trace_bytes = 1 << 20; /* a buffer without a trace */
	CHECK(check(&c) == -1 && strstr(errbuf, "'trace_buffer_bytes'") &&
	      strstr(errbuf, "needs trace_mode"));
	base(&c);
	c.trace_mode = HP_TRACE_ONESHOT;
	c.trace_bytes = 1000;
	CHECK(check(&c) == -1 && strstr(errbuf, "'trace_buffer_bytes'") &&
	      strstr(errbuf, "out of range"));
	base(&c);
	c.trace_mode = 9;
	CHECK(check(&c) == -1 && strstr(errbuf, "'trace_mode'"));
	static char *empty_prog[] = {"", NULL};
	config_defaults(&c);
	c.argv = empty_prog;
	CHECK(check(&c) == -1 && strstr(errbuf, "'command'"));
	config_defaults(&c);
	c.npids = 1;
	c.pids[0] = -4;
	CHECK(check(&c) == -1 && strstr(errbuf, "'pid'"));
}

static void test_add_helpers(void)
{
	struct session_config c;

	config_defaults(&c);
	CHECK(config_add_pid(&c, 0) != NULL);
	CHECK(config_add_pid(&c, CFG_PID_MAX + 1L) != NULL);
	CHECK(config_add_pid(&c, 12) == NULL);
	CHECK(!strcmp(config_add_pid(&c, 12), "given twice"));
	CHECK(!strcmp(config_add_name(&c, ""), "empty"));
	CHECK(config_add_name(&c, "srv") == NULL);
	CHECK(config_add_heap(&c, "h") == NULL);
	CHECK(config_add_heap(&c, "h") != NULL);
	CHECK_EQ_U64(c.npids, 1);
	CHECK_EQ_U64(c.nnames, 1);
	CHECK_EQ_U64(c.nheaps, 1);
	config_free(&c);
}

static void test_load(void)
{
	char path[] = "/tmp/heapprof-test-config-XXXXXX";
	int fd = mkstemp(path);
	static const char text[] = "pid: 99\nduration_ms: 1500\n";
	struct session_config c;

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK(write(fd, text, sizeof(text) - 1) == (ssize_t)sizeof(text) - 1);
	close(fd);
	config_defaults(&c);
	CHECK(config_load(&c, path) == 0);
	CHECK(c.npids == 1 && c.pids[0] == 99 && c.duration_ms == 1500);
	config_free(&c);

	/* "-" reads stdin. */
	int saved = dup(0);
	int in = open(path, O_RDONLY);
	dup2(in, 0);
	close(in);
	config_defaults(&c);
	CHECK(config_load(&c, "-") == 0);
	CHECK(c.npids == 1 && c.pids[0] == 99);
	dup2(saved, 0);
	close(saved);
	clearerr(stdin);
	config_free(&c);
	unlink(path);

	/* Missing file, a directory and a FIFO no one writes to (which an
	 * open(2) for reading would wait on for ever): one line naming the
	 * file, at once. */
	char fifo[] = "/tmp/heapprof-test-config-fifo-XXXXXX";
	int ffd = mkstemp(fifo);
	CHECK(ffd >= 0);
	if (ffd >= 0) {
		close(ffd);
		unlink(fifo);
	}
	CHECK(mkfifo(fifo, 0600) == 0);
	FILE *cap = tmpfile();
	saved = dup(2);
	fflush(stderr);
	dup2(fileno(cap), 2);
	config_defaults(&c);
	int r1 = config_load(&c, path);
	int r2 = config_load(&c, "/tmp");
	int r3 = config_load(&c, fifo);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(cap);
	size_t n = fread(errbuf, 1, sizeof(errbuf) - 1, cap);
	errbuf[n] = '\0';
	fclose(cap);
	unlink(fifo);
	CHECK(r1 == -1 && r2 == -1 && r3 == -1);
	char want[512];
	snprintf(want, sizeof(want),
	         "heapprof: record: config %s: No such file or directory\n"
	         "heapprof: record: config /tmp: not a regular file (a "
	         "directory)\n"
	         "heapprof: record: config %s: not a regular file (a FIFO)\n",
	         path, fifo);
	CHECK(!strcmp(errbuf, want));
	if (strcmp(errbuf, want))
		fprintf(stderr, "  got: %s", errbuf);
	config_free(&c);
}

static void test_sizes(void)
{
	static const struct {
		const char *s;
		uint64_t v;
	} good[] = {
	        {"0", 0},
	        {"4096", 4096},
	        {"4k", 4096},
	        {"4K", 4096},
	        {"4KiB", 4096},
	        {"1B", 1},
	        {"64m", 64 << 20},
	        {"64M", 64 << 20},
	        {"64MiB", 64 << 20},
	        {"2g", 2ull << 30},
	        {"2G", 2ull << 30},
	        {"2GiB", 2ull << 30},
	        {"17179869183G", 17179869183ull << 30}, /* 2^64 - 2^30 */
	};
	static const struct {
		const char *s, *why;
	} bad[] = {
	        {"", "empty value"},
	        {"-4k", "must be positive"},
	        {"k", "not a number"},
	        {" 4k", "not a number"},
	        {"1.5k", "not a whole number of bytes"},
	        {"4q", "unknown unit: want a number of bytes, optionally with "
	               "K, M or G (or KiB, MiB, GiB), multiples of 1024"},
	        {"4 k", "unknown unit: want a number of bytes, optionally "
	                "with K, M or G (or KiB, MiB, GiB), multiples of "
	                "1024"},
	        {"4T", "unknown unit: want a number of bytes, optionally with "
	               "K, M or G (or KiB, MiB, GiB), multiples of 1024"},
	        {"64MB", "ambiguous unit: use K, M or G (or KiB, MiB, GiB), "
	                 "multiples of 1024"},
	        {"4kB", "ambiguous unit: use K, M or G (or KiB, MiB, GiB), "
	                "multiples of 1024"},
	        {"18446744073709551616", "too large"},
	        {"17179869184G", "too large"}, /* 2^64 */
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint64_t v = 1234567;
		const char *why = NULL;
		CHECK(hp_parse_size(good[i].s, &v, &why) == 0);
		CHECK_EQ_U64(v, good[i].v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v = 1234567;
		const char *why = "";
		CHECK(hp_parse_size(bad[i].s, &v, &why) == -1);
		CHECK_EQ_U64(v, 1234567);
		if (strcmp(why, bad[i].why)) {
			fprintf(stderr, "  '%s': got '%s' want '%s'\n",
			        bad[i].s, why, bad[i].why);
			unit_failed_checks++;
		}
	}

	/* The config's byte fields take the same suffixes. */
	struct session_config c;
	config_defaults(&c);
	CHECK(read_text(&c, "sampling_interval_bytes: 4k\n"
	                    "shmem_size_bytes: 64MiB\n"
	                    "heaps: \"libc.malloc\"\n"
	                    "heap_sampling_intervals: 1M\n"
	                    "adaptive_sampling_shmem_threshold: 0.5\n"
	                    "adaptive_sampling_max_sampling_interval_bytes: "
	                    "1G\n"
	                    "trace_mode: ring\n"
	                    "trace_buffer_bytes: 2M\n") == 0);
	CHECK_EQ_U64(c.interval, 4096);
	CHECK_EQ_U64(c.shmem_size, 64 << 20);
	CHECK_EQ_U64(c.heap_intervals[0], 1 << 20);
	CHECK_EQ_U64(c.adaptive_max_interval, 1 << 30);
	CHECK_EQ_U64(c.trace_bytes, 2 << 20);
	config_free(&c);
	/* Other numbers do not: max_frames is a count. */
	config_defaults(&c);
	CHECK(read_text(&c, "max_frames: 1k\n") == -1);
	CHECK(!strcmp(errbuf, "heapprof: record: config t.cfg:1: field "
	                      "'max_frames': not a number ('1k')\n"));
	config_free(&c);
	config_defaults(&c);
	CHECK(read_text(&c, "shmem_size_bytes: 2048G\n") == -1);
	CHECK(!strcmp(errbuf, "heapprof: record: config t.cfg:1: field "
	                      "'shmem_size_bytes': too large ('2048G'): at "
	                      "most 1099511627776\n"));
	config_free(&c);
}

static void test_suggest(void)
{
	static const char *const cmds[] = {"record", "report", "sql",
	                                   "diff",   "dump",   "snapshot"};
	static const char *const opts[] = {"--interval", "--shmem-size",
	                                   "--heaps", "--heap-intervals"};
	size_t nc = sizeof(cmds) / sizeof(cmds[0]);
	size_t no = sizeof(opts) / sizeof(opts[0]);
	const char *s;

	CHECK((s = hp_suggest("recrod", cmds, nc)) && !strcmp(s, "record"));
	CHECK((s = hp_suggest("reocrd", cmds, nc)) && !strcmp(s, "record"));
	CHECK((s = hp_suggest("rec", cmds, nc)) && !strcmp(s, "record"));
	CHECK((s = hp_suggest("repor", cmds, nc)) && !strcmp(s, "report"));
	CHECK((s = hp_suggest("sq", cmds, nc)) && !strcmp(s, "sql"));
	CHECK((s = hp_suggest("snapshto", cmds, nc)) && !strcmp(s, "snapshot"));
	CHECK(hp_suggest("re", cmds, nc) == NULL); /* record or report */
	CHECK(hp_suggest("xyz", cmds, nc) == NULL);
	CHECK(hp_suggest("", cmds, nc) == NULL);
	CHECK(hp_suggest("d", cmds, nc) == NULL);
	CHECK((s = hp_suggest("--intervl", opts, no)) &&
	      !strcmp(s, "--interval"));
	CHECK((s = hp_suggest("--shmem-sise", opts, no)) &&
	      !strcmp(s, "--shmem-size"));
	CHECK((s = hp_suggest("--heap", opts, no)) && !strcmp(s, "--heaps"));
	CHECK(hp_suggest("--completely-different", opts, no) == NULL);
}

/* The command lines the profile records (util/args.c). */
static void test_join_args(void)
{
	char *const argv[] = {"sqlite3", "", "-cmd", ".read x", NULL};
	char *s;

	CHECK((s = hp_join_args(NULL, -1, argv)) &&
	      !strcmp(s, "sqlite3  -cmd .read x"));
	free(s);
	CHECK((s = hp_join_args(NULL, 1, argv)) && !strcmp(s, "sqlite3"));
	free(s);
	CHECK((s = hp_join_args("heapprof", 2, argv + 2)) &&
	      !strcmp(s, "heapprof -cmd .read x"));
	free(s);
	CHECK((s = hp_join_args("heapprof", 0, argv)) &&
	      !strcmp(s, "heapprof"));
	free(s);
	CHECK((s = hp_join_args(NULL, -1, argv + 4)) && !strcmp(s, ""));
	free(s);
}

int main(void)
{
	static const struct unit_test tests[] = {
	        {"defaults", test_defaults},
	        {"read_all_fields", test_read_all_fields},
	        {"read_command_and_block_forms",
	         test_read_command_and_block_forms},
	        {"round_trip", test_round_trip},
	        {"read_errors", test_read_errors},
	        {"check", test_check},
	        {"add_helpers", test_add_helpers},
	        {"load", test_load},
	        {"sizes", test_sizes},
	        {"suggest", test_suggest},
	        {"join_args", test_join_args},
	        {NULL, NULL},
	};
	return unit_main("config", tests);
}
