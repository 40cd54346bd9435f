/* A command line as one string, for the profile's records of what ran. */
#ifndef HEAPPROF_UTIL_ARGS_H
#define HEAPPROF_UTIL_ARGS_H

/*
 * first (if not NULL) and the arguments argv[0..argc) joined by single
 * spaces (argc < 0: up to argv's NULL).  malloc'd; NULL when out of memory.
 */
char *hp_join_args(const char *first, int argc, char *const *argv);

#endif
