/*
 * `heapprof serve -c FILE` (docs/FLEET.md, docs/CONFIG.md): serve's
 * options from a file.  The file is in heapprof's one config syntax
 * (util/cfg.h, as record's -c) with serve's fields:
 *
 *   process_cmdline: "redis-server"    # -n, repeatable
 *   sampling_interval_bytes: 64K       # -i
 *   listen: "0.0.0.0:6060"
 *   allow_remote: true
 *   token_file: "/etc/heapprof/token"
 *
 * A file that syntax cannot read and that holds no double quote (outside
 * comment lines) is read in serve's first format, which docs/FLEET.md
 * documented and which still works as it did: one `key: value` a line,
 * the long options' names (`-` or `_`), values unquoted to the end of the
 * line, `#` comments on lines of their own, with that format's messages.
 */
#ifndef HEAPPROF_CLI_SERVE_CONFIG_H
#define HEAPPROF_CLI_SERVE_CONFIG_H

/*
 * What the file sets, one option at a time in its order: key is the long
 * option without its dashes ("pid", "name", "interval", "heaps",
 * "all-heaps", "listen", "allow-remote", "token-file", "all-users",
 * "top", "max-connections", "timeout", "output"; in the first format any
 * key written, '_' made '-'), value its text ("true" or "false" for the
 * yes/no keys in the config syntax), line where it was set.  0, or -1
 * with the message printed: then the file is read no further.
 */
typedef int (*serve_config_apply_fn)(void *ctx, const char *path, int line,
                                     const char *key, const char *value);

/* Reads path ("-": stdin) and applies what it sets.  0, or -1 (one line
 * "heapprof: serve: ..." printed, by this or by apply). */
int serve_config_read(const char *path, serve_config_apply_fn apply, void *ctx);

#endif
