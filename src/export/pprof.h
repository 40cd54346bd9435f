/*
 * Building pprof profiles (profile.proto, gzipped) from profile data read
 * with src/store/reader.h, for `heapprof pprof` and `heapprof diff`.
 *
 * A profile has the four sample types of heapprof in reader order (space,
 * alloc_space, objects, alloc_objects; space is the default) and one
 * sample per leaf callsite added.  Mappings, locations and functions are
 * made on demand and shared between samples: a frame becomes one location
 * (its return address - 1, so the address is inside the call
 * instruction), with one line per function at that address when the frame
 * was symbolized offline (innermost first, as pprof wants), one line with
 * the frame's own name otherwise, and no line when the name is unknown.
 *
 * Samples may come from several stack tables (two profile files for a
 * diff): locations are kept per (table, frame), functions are shared by
 * name.  The tables must outlive the builder.
 *
 * Errors: functions return 0 or a negative errno; pp_write_gz prints one
 * line "heapprof: <subsys>: ..." on failure, the others print nothing.
 */
#ifndef HEAPPROF_EXPORT_PPROF_H
#define HEAPPROF_EXPORT_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "store/reader.h"

struct pp_profile;

/* A new empty profile sampled every `period` bytes (>= 1); NULL if out of
 * memory. */
struct pp_profile *pp_new(int64_t period);
void pp_free(struct pp_profile *p);

/* When the profile was taken (ns since the Unix epoch; 0 = unknown) and
 * the time it covers (ns; 0 = unknown). */
void pp_set_time(struct pp_profile *p, int64_t time_nanos,
                 int64_t duration_nanos);

/* Name the sample types as Go's heap profiles do (inuse_space,
 * alloc_space, inuse_objects, alloc_objects; inuse_space the default), for
 * scrapers of /debug/pprof/heap (`heapprof serve`). */
void pp_use_go_heap_names(struct pp_profile *p);

/* Add a comment line (pprof -comments shows them). */
int pp_add_comment(struct pp_profile *p, const char *text);

/*
 * Add the stack ending at leaf callsite `callsite` of s, with its values
 * in the four views (indexed by enum rd_view).  If label_key is not NULL,
 * the sample gets the string label label_key=label_value.  A sample whose
 * four values are all zero is not added (returns 0).
 */
int pp_add_sample(struct pp_profile *p, const struct rd_stacks *s,
                  int64_t callsite, const int64_t v[RD_NVIEWS],
                  const char *label_key, const char *label_value);

/*
 * A label of a sample (profile.proto Label): a string label when str is
 * not NULL, else a number num in num_unit (NULL: no unit), e.g.
 * {"address", "0x7f12a0001230"} or {"timestamp", NULL, ts, "nanoseconds"}.
 * Keys and values are copied.
 */
struct pp_label {
	const char *key;
	const char *str;
	int64_t num;
	const char *num_unit;
};

/*
 * pp_add_sample with any number of labels (pprof keeps them in order).
 * Samples of the same callsite share one copy of the stack, so one sample
 * per live block costs its values and labels, not its stack.  A sample
 * whose four values are all zero is not added (returns 0).
 */
int pp_add_sample_labels(struct pp_profile *p, const struct rd_stacks *s,
                         int64_t callsite, const int64_t v[RD_NVIEWS],
                         const struct pp_label *labels, size_t nlabels);

/* Number of samples added so far. */
size_t pp_nsamples(const struct pp_profile *p);

/* The profile as uncompressed protobuf bytes in *out (free() it). */
int pp_encode(struct pp_profile *p, uint8_t **out, size_t *len);

/* Encode and gzip into *out (malloc'd, *len bytes).  0 or a negative
 * errno. */
int pp_encode_gz(struct pp_profile *p, uint8_t **out, size_t *len);

/* Encode, gzip and write to path (replaced if it exists). */
int pp_write_gz(struct pp_profile *p, const char *path, const char *subsys);

/* ---- symbols ----------------------------------------------------------- */

/* An address of the profile's locations and the function there. */
struct pp_sym {
	uint64_t address;
	const char *name; /* into the table's names */
};

/*
 * The named locations of a profile, for a pprof symbol server (`heapprof
 * serve`'s /debug/pprof/symbol): each address with the innermost function
 * at it (the first of its lines, as Go's runtime.FuncForPC names the
 * innermost of those inlined at a pc), sorted by address, one entry per
 * address.  Names holding a control byte are left out: the symbol
 * protocol is one line per address.
 */
struct pp_symtab {
	struct pp_sym *syms;
	size_t n;
	char *names; /* the names, each NUL-terminated */
};

/* The table of p into *t (free with pp_symtab_free).  0 or -ENOMEM. */
int pp_symtab_make(const struct pp_profile *p, struct pp_symtab *t);
/* The entry of address in t, or NULL. */
const struct pp_sym *pp_symtab_find(const struct pp_symtab *t,
                                    uint64_t address);
void pp_symtab_free(struct pp_symtab *t);

/* ---- from a profile file ---------------------------------------------- */

/*
 * Add the state of heap `heap` of process upid at the dump at ts (read
 * from db, stacks s): one sample per leaf callsite.  With negate, every
 * value is negated and the samples get the label pprof::base=true, as
 * pprof does to the profile given with -diff_base.  *nadded (may be NULL)
 * gets the number of samples added.  0 or a negative errno (message
 * printed).
 */
int pp_add_dump(struct pp_profile *p, sqlite3 *db, const struct rd_stacks *s,
                int64_t upid, const char *heap, int64_t ts, int negate,
                size_t *nadded, const char *subsys);

/* The label pprof puts on the samples of a -diff_base profile. */
#define PP_DIFF_BASE_KEY   "pprof::base"
#define PP_DIFF_BASE_VALUE "true"

#endif
