/* The heapprof subcommands; each returns the process exit status. */
#ifndef HEAPPROF_CLI_COMMANDS_H
#define HEAPPROF_CLI_COMMANDS_H

int cmd_record(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_sql(int argc, char **argv);
int cmd_pprof(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_symbolize(int argc, char **argv);
int cmd_flamegraph(int argc, char **argv);
int cmd_daemon(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
