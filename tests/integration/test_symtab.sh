#!/usr/bin/env bash
# test_symtab.sh BUILD: the names `heapprof record` gives frames from the
# symbol tables alone (src/symbolize/symtab.c).  A C program built here
# with -rdynamic allocates (-i 1, 3 times each) from an exported function,
# a static function and, on x86-64, an assembly function without a size
# (a label: no symbol covers its code, libdwfl's rules name it anyway).
# Recorded from the file with .symtab, every one is named exactly; from a
# stripped copy (.dynsym only) the exported and assembly ones still are,
# the static one is not, and callers are named alike.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../lib.sh"
. "$HERE/helpers.sh"
t_setup_build "$1"
t_require "$HP" "$BUILD/libheapprof.so"

for tool in cc objcopy readelf; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		t_begin "prerequisites"
		t_fail "$tool is missing"
		t_summary
	fi
done

mkdir -p "$T_DIR/src"
SRC="$T_DIR/src/symtab_prog.c"
cat >"$SRC" <<'EOF'
#include <stdio.h>
#include <stdlib.h>

void *volatile sink;

__attribute__((noinline)) void *exported_alloc(unsigned long n)
{
	void *p = malloc(n);
	sink = p;
	return p;
}

__attribute__((noinline)) static void *static_alloc(unsigned long n)
{
	void *p = malloc(n);
	sink = p;
	return p;
}

#ifdef __x86_64__
void *asm_alloc(unsigned long n);
/* A function symbol of size 0, with unwind info. */
__asm__(".text\n"
        ".globl asm_alloc\n"
        ".type asm_alloc, @function\n"
        "asm_alloc:\n"
        ".cfi_startproc\n"
        "push %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "mov %rsp, %rbp\n"
        ".cfi_def_cfa_register %rbp\n"
        "call malloc@PLT\n"
        "pop %rbp\n"
        ".cfi_def_cfa %rsp, 8\n"
        "ret\n"
        ".cfi_endproc\n");
#endif

int main(void)
{
	for (int i = 0; i < 3; i++) {
		exported_alloc(100);
		static_alloc(200);
#ifdef __x86_64__
		sink = asm_alloc(400);
#endif
	}
	printf("done\n");
	return 0;
}
EOF
FULL="$T_DIR/full"
STRIPPED="$T_DIR/stripped"

t_begin "build; the stripped copy has .dynsym and no .symtab"
if ! run_bounded 120 cc -O0 -fno-omit-frame-pointer -rdynamic -o "$FULL" "$SRC" \
	2>"$T_DIR/cc.err"; then
	t_fail "cc failed: $(head -c 600 "$T_DIR/cc.err")"
	t_summary
fi
objcopy --strip-all "$FULL" "$STRIPPED" || t_fail "objcopy --strip-all failed"
SECTIONS=$(readelf -S "$STRIPPED")
assert_no_match '\.symtab' "$SECTIONS" "no .symtab in the stripped copy"
assert_match '\.dynsym' "$SECTIONS" ".dynsym in the stripped copy"

# names DB: "bytes|name|system_name|caller name" of each callsite of the
# program (positive rows), by bytes.
names() {
	hp_sql_csv "$1" "SELECT sum(a.size) || '|' || coalesce(f.name, '') || '|' ||
	  coalesce(f.system_name, '') || '|' || coalesce(pf.name, '') AS v
	  FROM heap_profile_allocation a
	  JOIN stack_profile_callsite c ON a.callsite_id = c.id
	  JOIN stack_profile_frame f ON c.frame_id = f.id
	  JOIN stack_profile_mapping m ON f.mapping = m.id
	  LEFT JOIN stack_profile_callsite p ON c.parent_id = p.id
	  LEFT JOIN stack_profile_frame pf ON p.frame_id = pf.id
	  WHERE a.count > 0 AND m.name = '$2'
	  GROUP BY c.id ORDER BY sum(a.size)"
}

ASM_FULL="" ASM_STRIPPED=""
case "$(uname -m)" in
x86_64)
	ASM_FULL=$'\n1200|asm_alloc|asm_alloc|main'
	ASM_STRIPPED=$ASM_FULL
	;;
esac

for kind in full stripped; do
	t_begin "record the $kind file with -i 1: exact names"
	BIN="$T_DIR/$kind"
	hp_record "$kind" -i 1 -o "$T_DIR/$kind.db" -- "$BIN"
	assert_eq 0 "$REC_RC" "record status" || show_err "$kind"
	db_valid "$T_DIR/$kind.db" || continue
	if [ "$kind" = full ]; then
		want="300|exported_alloc|exported_alloc|main
600|static_alloc|static_alloc|main$ASM_FULL"
	else
		# No symbol of .dynsym covers the static function.
		want="300|exported_alloc|exported_alloc|main
600|||main$ASM_STRIPPED"
	fi
	assert_eq "$want" "$(names "$T_DIR/$kind.db" "$BIN")" "names of the $kind file"
done

t_summary
