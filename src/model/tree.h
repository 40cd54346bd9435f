/*
 * The heap model's call tree: the one place that says what a function and
 * a node of a call stack are.  Every view of a profile (report, diff,
 * check, the flame graph page, pprof, the SQL table
 * experimental_flamegraph) names functions and builds trees through it;
 * docs/ARCHITECTURE.md, "The heap model", says the same in prose.
 *
 * Identity, defined once:
 *
 *  - A function is (module, source file, name).  The module is the mapping
 *    of the frame (its path); the source file is known when the profile
 *    was symbolized offline (`heapprof symbolize`), else none; the name is
 *    the demangled symbol.  A frame without a name is a function of its
 *    own, named "module+0xrelpc" (the module's file name and the frame's
 *    address in it), so unnamed frames never merge.  Two static functions
 *    of the same name are one function unless their modules or (after
 *    `heapprof symbolize`) their source files differ.
 *  - A frame is a chain of functions, callers first: the functions inlined
 *    at its address (offline symbols, outermost first), or its own name.
 *  - A node of the top-down tree is (parent node, function): a recorded
 *    callsite becomes one node per function of its frame's chain, and
 *    callsites of the same function under the same parent share a node.
 *    A node's line is the source line of its function there, or -1 when
 *    its callsites are on several lines (0: unknown).
 *  - A node of the bottom-up tree is (parent node, function) too, with the
 *    function that allocated at the root and its callers below it: the
 *    top-down path of a leaf node read from the leaf up.
 *
 * Nodes are created callers first, so a node's parent always has a
 * smaller index.  A parent loop or a chain deeper than RD_MAX_DEPTH in a
 * bad file is cut: the callsite where it is cut becomes a root.
 */
#ifndef HEAPPROF_MODEL_TREE_H
#define HEAPPROF_MODEL_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "util/pairmap.h"
#include "store/reader.h"
#include "util/hmap.h"

struct tree_ivec {
	int32_t *v;
	size_t n, cap;
};

struct tree_func {
	char *name;     /* never NULL */
	int32_t module; /* index into s->mappings, -1 if unknown */
	int32_t file;   /* index into files, -1 if unknown */
	int named;      /* a symbol's name (else "module+0xrelpc") */
	int64_t rel_pc; /* unnamed: the frame's address in its module */
};

/* A set of nodes: (parent, function) -> node, parents first. */
struct tree_nodes {
	struct tree_ivec parent, func, line;
	struct pairmap idx; /* (parent, func) -> node + 1 */
};

struct tree {
	const struct rd_stacks *s;
	/* Functions, interned by (module, file, name). */
	struct tree_func *funcs;
	size_t nfuncs, funcs_cap;
	struct hmap func_idx;
	/* Source files, interned by name (the strings belong to s). */
	const char **files;
	size_t nfiles, files_cap;
	struct hmap file_idx;
	/* Per frame (index into s->frames): its chain of (func, line),
	 * outermost first, at chain[frame_off[i]..]; frame_len 0 until
	 * computed. */
	int32_t *frame_off, *frame_len;
	struct tree_ivec chain_func, chain_line;
	/* The top-down tree. */
	struct tree_nodes top;
	/* Per callsite (index into s->callsites): its node, or CS_*. */
	int32_t *cs_node;
	size_t *stack;         /* RD_MAX_DEPTH + 1 callsite indices */
	int32_t unknown_node;  /* for rows with an unknown callsite; or -1 */
	int32_t unknown_frame; /* the function of a dangling frame; or -1 */
};

/* 0 or -ENOMEM; tree_free either way. */
int tree_init(struct tree *g, const struct rd_stacks *s);
void tree_free(struct tree *g);

/* The top-down node of state slot i (a callsite's index in s->callsites,
 * or s->ncallsites: the unknown callsite), created with its callers'
 * nodes; -1 if out of memory. */
int32_t tree_slot_node(struct tree *g, size_t i);

/* The slot of callsite id (s->ncallsites if it is unknown or 0). */
size_t tree_slot(const struct rd_stacks *s, int64_t id);

/* The top-down node of the leaf callsite id; -1 if out of memory. */
int32_t tree_leaf_node(struct tree *g, int64_t callsite);

/*
 * The functions of frame id (its inline chain, outermost first) and their
 * lines, computed once per frame: *funcs and *lines point into g (valid
 * until the next call that adds to g).  Returns the chain's length (at
 * least 1: a dangling id is "[unknown frame]"), or -1 if out of memory.
 */
int tree_frame_chain(struct tree *g, int64_t frame, const int32_t **funcs,
                     const int32_t **lines);

/*
 * Function f's name where its module is shown beside it (report's tables,
 * diff): an unnamed frame's "0x<relpc>" (its "module+" left out), else its
 * name.  Returns buf or the name.
 */
const char *tree_func_short(const struct tree *g, int32_t f, char *buf,
                            size_t len);

/* Whether glob (fnmatch) names some function of g's stacks, each
 * frame's inlined functions too (a typo, or a renamed function, names
 * none): 1, 0, or -ENOMEM. */
int tree_names_match(struct tree *g, const char *glob);

/* The module of function f: the mapping's path, or NULL if unknown. */
const char *tree_func_module(const struct tree *g, int32_t f);
/* The source file of function f, or NULL if unknown. */
const char *tree_func_file(const struct tree *g, int32_t f);

/* ---- the bottom-up tree -------------------------------------------------- */

void tree_nodes_init(struct tree_nodes *t);
void tree_nodes_free(struct tree_nodes *t);
/* The node of func (at line) under parent (-1: a root) in t, added if
 * new; -1 if out of memory. */
int32_t tree_nodes_child(struct tree_nodes *t, int32_t parent, int32_t func,
                         int32_t line);

/*
 * The bottom-up path of top-down node `node` in inv: out[0] the node of
 * its function at a root, out[k] that of its k-th caller.  Returns the
 * path's length (at most max), or -1 if out of memory.  Adding a leaf's
 * value to each node of its path gives every bottom-up node its
 * cumulative value.
 */
int tree_bottom_up(const struct tree *g, struct tree_nodes *inv, int32_t node,
                   int32_t *out, size_t max);

#endif
