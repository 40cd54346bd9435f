/*
 * The flame graph page's template (flamegraph.html, .css, .js in this
 * directory), embedded into the heapprof binary at build time with the
 * assembler's .incbin.  The paths are relative to the top of the source
 * tree, where make runs the compiler; the Makefile lists the three files as
 * prerequisites of this object so an edit rebuilds it.  Each blob is
 * followed by a NUL byte and an end symbol (see assets.h).
 */
#include "flamegraph/assets.h"

#define HP_FG_ASSET(sym, file)                                                 \
	".globl " sym "\n"                                                     \
	".hidden " sym "\n"                                                    \
	".type " sym ", @object\n" sym ":\n"                                   \
	".incbin \"" file "\"\n"                                               \
	".globl " sym "_end\n"                                                 \
	".hidden " sym "_end\n" sym "_end:\n"                                  \
	".byte 0\n"

/* clang-format off */
#define HP_FG_ASSETS                                                           \
	".pushsection .rodata, \"a\", @progbits\n"                            \
	HP_FG_ASSET("hp_fg_html", "src/flamegraph/flamegraph.html")            \
	HP_FG_ASSET("hp_fg_css", "src/flamegraph/flamegraph.css")              \
	HP_FG_ASSET("hp_fg_js", "src/flamegraph/flamegraph.js")                \
	".popsection\n"
/* clang-format on */

__asm__(HP_FG_ASSETS);
