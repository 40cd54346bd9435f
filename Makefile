# heapprof build.  `make` builds build/heapprof and build/libheapprof.so;
# `make test` builds and runs the test suite; `make demo` profiles the
# bundled example.  Both install missing Debian packages first.
# `make install` (PREFIX, DESTDIR) installs the programs, the client
# library, the API header and heapprof.pc; `make uninstall` removes them.

# A parallel build by default, one job per core (an explicit -jN wins).
# The targets that install Debian packages first (DEPS_GOALS) do that
# alone, then build in a parallel sub-make (SUBMAKE): a compile must not
# start before the headers it needs are installed.
NPROC := $(shell nproc 2>/dev/null || echo 2)
DEPS_GOALS := unit integration test demo bench bench-cost bench-api \
              bench-trace bench-scale bench-attach bench-serve lint deb-test
ifeq ($(MAKELEVEL),0)
ifeq ($(filter $(DEPS_GOALS),$(MAKECMDGOALS)),)
MAKEFLAGS += -j$(NPROC)
endif
endif
SUBMAKE = $(MAKE) --no-print-directory \
          $(if $(findstring -j,$(MAKEFLAGS)),,-j$(NPROC))

# A quiet build by default: one line per file made (CC, CXX, PROTOC,
# LINK); V=1 shows the commands.
V ?= 0
ifeq ($(V),1)
say =
Q :=
else
say = @printf '  %-7s %s\n' '$(1)' '$@';
Q := @
endif

CC      ?= gcc
PREFIX  ?= /usr/local
BUILD   ?= build
OPT     ?= -O2
SAN     ?=
WARN    := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes
CFLAGS  ?= $(OPT) -g
# Sanitizers (docs/safety/sanitizers.md): SAN=asan (ASan+UBSan) or SAN=tsan
# instrument the CLI, the daemon and the unit tests; the client library,
# preloaded into uninstrumented programs, gets UBSan only (ASan and TSan
# runtimes cannot be preloaded into a program that was not built with
# them).  Any other SAN value is raw flags, given to everything.
# The client links UBSan's runtime statically: libubsan.so needs
# libstdc++, which would then be in every profiled program, its emergency
# pool allocated before the client's constructor and recorded
# (src/client/early.c), one block no release build has.
ifeq ($(SAN),asan)
SAN_FLAGS  := -fsanitize=address,undefined -fno-sanitize-recover=all \
              -fno-omit-frame-pointer
CLIENT_SAN := -fsanitize=undefined -fno-sanitize-recover=all
CLIENT_SAN_LINK := -static-libubsan
else ifeq ($(SAN),tsan)
# -Wno-tsan: TSan does not model atomic_thread_fence (the live table's
# seqlock, src/layout/region.c); the data it orders is read and written
# with atomics, so TSan has nothing to report there either way.
SAN_FLAGS  := -fsanitize=thread -Wno-tsan
CLIENT_SAN := -fsanitize=undefined -fno-sanitize-recover=all
CLIENT_SAN_LINK := -static-libubsan
else
SAN_FLAGS  := $(SAN)
CLIENT_SAN := $(SAN)
endif
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -Isrc -Iinclude $(CFLAGS)
ALL_CFLAGS := $(BASE_CFLAGS) $(SAN_FLAGS)

# The client lives inside the profiled program: hidden visibility, only the
# malloc family and the public API exported (src/client/libheapprof.map).
LIB_CFLAGS := $(BASE_CFLAGS) $(CLIENT_SAN) -fPIC -fvisibility=hidden -fexceptions \
              -fno-omit-frame-pointer -ftls-model=initial-exec
LIB_LIBS   := -lm -ldl -pthread

CORE_LIBS  := -lsqlite3 -ldw -lelf -lz -lzstd -lprotobuf-c -ledit -liberty -lm \
              -pthread
# libmicrohttpd (heapprof serve) only in the heapprof binary: it brings
# GnuTLS, whose constructors allocate ~1000 blocks in every program linked
# with it (the unit tests' profiled children among them).
CLI_LIBS   := $(CORE_LIBS) -lmicrohttpd

LAYOUT_SRCS := $(wildcard src/layout/*.c)
CLIENT_SRCS := $(wildcard src/client/*.c) $(LAYOUT_SRCS)
CLI_SRCS    := $(wildcard src/cli/*.c src/collector/*.c src/session/*.c \
                 src/config/*.c src/inject/*.c src/inspect/*.c src/store/*.c \
                 src/sql/*.c src/analysis/*.c src/model/*.c src/symbolize/*.c \
                 src/util/*.c src/export/*.c src/daemon/*.c \
                 src/flamegraph/*.c src/agent/*.c src/top/*.c) $(LAYOUT_SRCS)

# pprof's profile.proto, compiled by protoc-c into the build dir.
PROTO_GEN   := $(BUILD)/gen
PROTO_C     := $(PROTO_GEN)/export/profile.pb-c.c
PROTO_H     := $(PROTO_GEN)/export/profile.pb-c.h
PROTO_OBJ   := $(BUILD)/obj/gen/export/profile.pb-c.o
EXPORT_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/export/*.c))

CLIENT_OBJS := $(patsubst %.c,$(BUILD)/pic/%.o,$(CLIENT_SRCS))
CLI_OBJS    := $(patsubst %.c,$(BUILD)/obj/%.o,$(CLI_SRCS)) $(PROTO_OBJ)
# Everything but main() and heapprof serve's HTTP side (the objects that
# use libmicrohttpd: src/agent/serve*.c, and the command that starts it),
# for unit tests.
SERVE_OBJS  := $(BUILD)/obj/src/cli/cmd_serve.o \
               $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/agent/serve*.c))
CORE_OBJS   := $(filter-out $(BUILD)/obj/src/cli/main.o $(SERVE_OBJS),$(CLI_OBJS))

# The version `heapprof version` prints, for heapprof.pc.
VERSION     := $(shell sed -n 's/^\#define HEAPPROF_VERSION "\(.*\)"$$/\1/p' src/cli/main.c)
# The client library is versioned: programs linked with -lheapprof record
# its soname (DT_NEEDED libheapprof.so.1), so that an incompatible
# libheapprof.so.2 could be installed beside it one day.  libheapprof.so
# is a link to it, for -lheapprof and for `heapprof record`'s preload; the
# preloaded copy and the linked one have the same soname, so ld.so maps
# one library even when they are found under different paths.
LIB_SONAME  := libheapprof.so.1

UNIT_SRCS   := $(wildcard tests/unit/test_*.c)
UNIT_BINS   := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
PROG_SRCS   := $(wildcard tests/integration/progs/*.c)
PROG_CXX    := $(wildcard tests/integration/progs/*.cc)
PROG_BINS   := $(patsubst tests/integration/progs/%.c,$(BUILD)/progs/%,$(PROG_SRCS)) \
               $(patsubst tests/integration/progs/%.cc,$(BUILD)/progs/%,$(PROG_CXX))
EXAMPLE_BINS := $(BUILD)/examples/demo $(BUILD)/examples/pool
BENCH_BINS  := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))

# The per-ABI tree `record` preloads through (src/session/preload.c):
# heapprof-abi/$LIB/libheapprof.so.1, this build's library for its own ABI
# and an empty 32-bit one for the i386 programs a profiled program may
# start (their loader would refuse the 64-bit client on their stderr).
# Debian's layouts of $LIB only: lib/<multiarch>, and lib32 for the
# loader of libc6-i386; without -m32 support in the toolchain there is no
# 32-bit stub.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
ABI_TREE  := $(BUILD)/heapprof-abi
# NO_STUB32=1 (Debian's amd64 package: no i386 object in it) leaves the
# 32-bit stub out: a 32-bit program started under record then says
# "wrong ELF class" for the preload and runs unprofiled.
ifeq ($(MULTIARCH),x86_64-linux-gnu)
ABI_FILES := $(ABI_TREE)/lib/x86_64-linux-gnu/$(LIB_SONAME)
ifneq ($(NO_STUB32),1)
ABI_FILES += $(ABI_TREE)/lib/i386-linux-gnu/$(LIB_SONAME) \
             $(ABI_TREE)/lib32/$(LIB_SONAME)
endif
endif

.PHONY: all deps test-deps test unit integration demo deb-test bench bench-cost bench-api bench-trace \
        bench-scale bench-attach install uninstall clean format check-format lint
all: $(BUILD)/heapprof $(BUILD)/heapprofd $(BUILD)/libheapprof.so $(EXAMPLE_BINS) \
     $(ABI_FILES) $(BUILD)/man/heapprof.1

# The man pages, made from the --help texts and the API header
# (scripts/manpages.sh): they cannot drift from them.
$(BUILD)/man/heapprof.1: $(BUILD)/heapprof scripts/manpages.sh \
                         include/heapprof/heap_profile.h
	$(call say,MAN)scripts/manpages.sh $(BUILD)/heapprof $(BUILD)/man

$(ABI_TREE)/lib/x86_64-linux-gnu/$(LIB_SONAME): $(BUILD)/$(LIB_SONAME)
	@mkdir -p $(dir $@)
	$(Q)ln -sf ../../../$(LIB_SONAME) $@

$(ABI_TREE)/lib32/$(LIB_SONAME): $(ABI_TREE)/lib/i386-linux-gnu/$(LIB_SONAME)
	@mkdir -p $(dir $@)
	$(Q)ln -sf ../lib/i386-linux-gnu/$(LIB_SONAME) $@

$(ABI_TREE)/lib/i386-linux-gnu/$(LIB_SONAME): src/stub32/stub32.c
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) -m32 -shared -nostdlib -fPIC -O2 -Wl,-soname,$(LIB_SONAME) \
	  -o $@ $< || { rm -f $@; echo "no 32-bit stub: $(CC) -m32 failed"; }

deps:
	@scripts/deps.sh

test-deps:
	@scripts/deps.sh --test

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) $(LIB_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

# The commit a build is of, for `heapprof version`: git's, with "-dirty"
# for uncommitted changes; COMMIT=... where there is no git (a source
# package).  Rewritten only when it changes: a new commit rebuilds
# main.o alone.
VERSION_H := $(BUILD)/gen/version.h
.PHONY: FORCE
FORCE:
$(VERSION_H): FORCE
	@mkdir -p $(dir $@)
	@c='$(COMMIT)'; [ -n "$$c" ] || \
	  c=$$(git -C '$(CURDIR)' describe --always --dirty --abbrev=12 \
	       2>/dev/null) || c=unknown; \
	 printf '#define HEAPPROF_COMMIT "%s"\n' "$$c" >$@.tmp; \
	 if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
# Where an installed heapprof looks for its library: ../lib/MULTIARCH too.
$(BUILD)/obj/src/session/launch.o: ALL_CFLAGS += -DHP_MULTIARCH='"$(MULTIARCH)"'
$(BUILD)/obj/src/cli/main.o: $(VERSION_H)
$(BUILD)/obj/src/cli/main.o: ALL_CFLAGS += -I$(BUILD)/gen

# A pattern rule with two targets: one protoc-c run makes both, also
# under make -j.  Code that includes the header depends on it, so a clean
# parallel build generates it first.
$(PROTO_GEN)/%.pb-c.c $(PROTO_GEN)/%.pb-c.h: src/%.proto
	@mkdir -p $(PROTO_GEN)
	$(call say,PROTOC)protoc-c --proto_path=src --c_out=$(PROTO_GEN) $<

$(PROTO_OBJ): $(PROTO_C) $(PROTO_H)
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) $(ALL_CFLAGS) -I$(PROTO_GEN) -MMD -MP -c $< -o $@

$(EXPORT_OBJS) $(BUILD)/tests/test_pprof: $(PROTO_H)
$(EXPORT_OBJS) $(BUILD)/tests/test_pprof: ALL_CFLAGS += -I$(PROTO_GEN)

# -z now: every symbol the library uses is bound at load.  A lazy binding
# inside a hook (the first memcpy of a capture) would run ld.so's resolver
# on the program's stack, which saves every vector register there (2.5 KiB
# and more with AVX-512): too much for a signal handler on a small
# alternate stack.
$(BUILD)/$(LIB_SONAME): $(CLIENT_OBJS) src/client/libheapprof.map
	$(call say,LINK)$(CC) -shared -o $@ $(CLIENT_OBJS) $(CLIENT_SAN) $(CLIENT_SAN_LINK) \
	  -Wl,--version-script=src/client/libheapprof.map -Wl,-z,nodelete \
	  -Wl,-z,now \
	  -Wl,-soname,$(LIB_SONAME) $(LIB_LIBS)

# ln -sf also replaces the plain file an older build left under this name.
$(BUILD)/libheapprof.so: $(BUILD)/$(LIB_SONAME)
	$(Q)ln -sf $(LIB_SONAME) $@

# The unwind oracle (src/client/oracle.c, test_unwind_diff.sh): the client
# built with -DHP_UNWIND_ORACLE, which checks every capture against libgcc's
# _Unwind_Backtrace and reports at exit.  For tests only (HEAPPROF_LIB).
# libgcc_s is needed even though nothing links against it by name: the
# oracle looks its unwinder up with dlsym (oracle.c says why).
ORACLE_OBJS := $(patsubst %.c,$(BUILD)/pic-oracle/%.o,$(CLIENT_SRCS))

$(BUILD)/pic-oracle/%.o: %.c
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) $(LIB_CFLAGS) -DHP_UNWIND_ORACLE -MMD -MP -c $< -o $@

$(BUILD)/libheapprof-oracle.so: $(ORACLE_OBJS) src/client/libheapprof.map
	$(call say,LINK)$(CC) -shared -o $@ $(ORACLE_OBJS) $(CLIENT_SAN) $(CLIENT_SAN_LINK) \
	  -Wl,--version-script=src/client/libheapprof.map -Wl,-z,nodelete \
	  -Wl,-z,now \
	  -Wl,-soname,$(LIB_SONAME) -Wl,--push-state,--no-as-needed -lgcc_s \
	  -Wl,--pop-state $(LIB_LIBS)

$(BUILD)/heapprof: $(CLI_OBJS)
	$(call say,LINK)$(CC) -o $@ $(CLI_OBJS) $(SAN_FLAGS) $(CLI_LIBS)

# heapprofd is the same program: main() runs the daemon under that name.
$(BUILD)/heapprofd: $(BUILD)/heapprof
	$(Q)ln -sf heapprof $@

# (Some include the client's sources: test_client_recorder, test_sampler,
# test_unwind_ctx.)
$(BUILD)/tests/%: tests/unit/%.c $(CORE_OBJS) tests/unit/unit.h tests/unit/unwind_stub.h \
  $(wildcard src/client/*.c src/client/*.h)
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) $(ALL_CFLAGS) -Itests/unit -o $@ $< $(CORE_OBJS) $(CORE_LIBS)

# test_got (src/client/got.c): got.c in a library of its own with hooks
# that count (the one object got.c leaves alone, as libheapprof.so), and
# libraries that reach the allocator through their PLT (lazy and -z now),
# their GOT and pointers in data (-fno-plt), or an allocator of their own.
GOT_DIR  := $(BUILD)/tests/got
GOT_SO   := $(CC) -std=gnu11 -O1 -g -fPIC -shared -fno-builtin
GOT_LIBS := $(GOT_DIR)/libgot_hooks.so $(GOT_DIR)/libgot_plt.so \
            $(GOT_DIR)/libgot_plt_now.so $(GOT_DIR)/libgot_plt_late.so \
            $(GOT_DIR)/libgot_gd.so \
            $(GOT_DIR)/libgot_own.so $(GOT_DIR)/libgot_user.so \
            $(GOT_DIR)/libgot_user_lazy.so

$(GOT_DIR)/libgot_hooks.so: tests/unit/got/hooks.c src/client/got.c src/client/got.h
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) $(BASE_CFLAGS) -fPIC -shared -o $@ $< -ldl

$(GOT_DIR)/libgot_plt.so: tests/unit/got/lib_plt.c
	@mkdir -p $(dir $@)
	$(call say,CC)$(GOT_SO) -Wl,-z,lazy -o $@ $<

$(GOT_DIR)/libgot_plt_now.so $(GOT_DIR)/libgot_plt_late.so: tests/unit/got/lib_plt.c
	@mkdir -p $(dir $@)
	$(call say,CC)$(GOT_SO) -Wl,-z,now -o $@ $<

$(GOT_DIR)/libgot_gd.so: tests/unit/got/lib_gd.c
	@mkdir -p $(dir $@)
	$(call say,CC)$(GOT_SO) -fno-plt -Wl,-z,now -o $@ $<

$(GOT_DIR)/libgot_own.so: tests/unit/got/lib_own.c
	@mkdir -p $(dir $@)
	$(call say,CC)$(GOT_SO) -o $@ $<

$(GOT_DIR)/libgot_user.so: tests/unit/got/lib_user.c $(GOT_DIR)/libgot_own.so
	$(call say,CC)$(GOT_SO) -Wl,-z,now -o $@ $< -L$(GOT_DIR) -lgot_own -Wl,-rpath,'$$ORIGIN'

$(GOT_DIR)/libgot_user_lazy.so: tests/unit/got/lib_user.c $(GOT_DIR)/libgot_own.so
	$(call say,CC)$(GOT_SO) -Wl,-z,lazy -o $@ $< -L$(GOT_DIR) -lgot_own -Wl,-rpath,'$$ORIGIN'

# got.c with room for 4 slots, and a program that patches 8.
$(GOT_DIR)/libgot_hooks_small.so: tests/unit/got/hooks.c src/client/got.c src/client/got.h
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) $(BASE_CFLAGS) -DGOT_MAX_SLOTS=4 -fPIC -shared -o $@ $< -ldl

$(GOT_DIR)/got_small: tests/unit/got/small.c src/client/got.h $(GOT_DIR)/libgot_hooks_small.so
	$(call say,CC)$(CC) -std=gnu11 -O1 -g -fno-builtin -Isrc -o $@ $< -L$(GOT_DIR) \
	  -lgot_hooks_small -Wl,-rpath,'$$ORIGIN'

# Not a PIE, and malloc's address taken in code: a canonical PLT entry.
$(GOT_DIR)/got_canon: tests/unit/got/canon.c src/client/got.h $(GOT_DIR)/libgot_hooks.so
	$(call say,CC)$(CC) -std=gnu11 -O1 -g -fno-builtin -fno-pie -no-pie -Isrc -o $@ $< \
	  -L$(GOT_DIR) -lgot_hooks -Wl,-rpath,'$$ORIGIN' -ldl

$(BUILD)/tests/test_got: tests/unit/test_got.c tests/unit/unit.h $(GOT_LIBS) \
  $(GOT_DIR)/got_canon $(GOT_DIR)/got_small
	$(call say,CC)$(CC) $(BASE_CFLAGS) -fno-builtin -Itests/unit -o $@ $< -L$(GOT_DIR) \
	  -lgot_hooks -lgot_plt -lgot_gd -Wl,-rpath,'$$ORIGIN/got' -ldl -pthread

# The injector's test (tests/unit/test_inject.c, src/inject/inject.c)
# runs its target programs, so `make unit` builds them: inject_payload is
# a shared object (the test dlopens it into inject_target), inject_static
# the same target linked -static (a refusal), if the toolchain can (else
# the test skips that case).
INJECT_PROGS := $(BUILD)/progs/inject_target $(BUILD)/progs/inject_payload \
                $(BUILD)/progs/inject_static
$(BUILD)/tests/test_inject: $(INJECT_PROGS)

$(BUILD)/progs/inject_payload: tests/integration/progs/inject_payload.c
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) -std=gnu11 -O0 -g -shared -fPIC -o $@ $<

$(BUILD)/progs/inject_static: tests/integration/progs/inject_target.c
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) -std=gnu11 -O0 -g -static -pthread -o $@ $< || \
	  { rm -f $@; echo "no static inject_target: $(CC) -static failed"; }

# The flame graph page's template, embedded by src/flamegraph/assets.c.
$(BUILD)/obj/src/flamegraph/assets.o: src/flamegraph/flamegraph.html \
  src/flamegraph/flamegraph.css src/flamegraph/flamegraph.js

# Integration test programs: -O0 so every test function keeps its frame.
$(BUILD)/progs/%: tests/integration/progs/%.c
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) -std=gnu11 -O0 -g -fno-inline -pthread -o $@ $< -ldl

$(BUILD)/progs/%: tests/integration/progs/%.cc
	@mkdir -p $(dir $@)
	$(call say,CXX)g++ -std=c++17 -O0 -g -fno-inline -pthread -o $@ $<

# test_safety.sh's special builds.  Frame pointers only: no .eh_frame (and,
# without -g, no .debug_frame) for the program's own code.
$(BUILD)/progs/safe_fponly: tests/integration/progs/safe_fponly.c \
  tests/integration/progs/safe_common.h
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) -std=gnu11 -O0 -fno-inline -fno-omit-frame-pointer \
	  -fno-asynchronous-unwind-tables -fno-unwind-tables -pthread -o $@ $<

# test_capture.sh: cap_fdreuse's own code has no CFI either.
$(BUILD)/progs/cap_fdreuse: tests/integration/progs/cap_fdreuse.c \
  tests/integration/progs/safe_common.h
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) -std=gnu11 -O0 -fno-inline -fno-omit-frame-pointer \
	  -fno-asynchronous-unwind-tables -fno-unwind-tables -pthread -o $@ $<

# Its own static unwinder and C++ runtime.
$(BUILD)/progs/safe_static_libgcc: tests/integration/progs/safe_static_libgcc.cc \
  tests/integration/progs/safe_exc.cc tests/integration/progs/safe_common.h
	@mkdir -p $(dir $@)
	$(call say,CXX)g++ -std=c++17 -O0 -g -fno-inline -pthread -static-libgcc \
	  -static-libstdc++ -o $@ $<

# test_unwind_diff.sh's tail calls need the optimiser: at -O2 a call in
# tail position is a jump (and there is no frame pointer).
$(BUILD)/progs/ud_tail: tests/integration/progs/ud_tail.c \
  tests/integration/progs/ud_common.h tests/integration/progs/safe_common.h
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) -std=gnu11 -O2 -g -pthread -o $@ $<

# test_unwind_diff.sh's large frames probed a page at a time, as Debian
# builds its packages (the CFA on r11 while the probe runs).
$(BUILD)/progs/ud_probe: tests/integration/progs/ud_probe.c \
  tests/integration/progs/ud_common.h tests/integration/progs/safe_common.h
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) -std=gnu11 -O2 -g -fstack-clash-protection -pthread -o $@ $<

$(BUILD)/examples/%: examples/%.c
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) -std=gnu11 -O1 -g -fno-inline -pthread -o $@ $<

# Programs using the custom allocator API (heapprof/heap_profile.h) link
# the client library and find it at run time in the build directory, one
# level up from their own ($$ORIGIN/..), as an installed program finds it
# in $(PREFIX)/lib.
API_LINK := -Iinclude -L$(BUILD) -lheapprof -Wl,-rpath,'$$ORIGIN/..'

$(BUILD)/examples/pool: examples/pool.c include/heapprof/heap_profile.h \
  $(BUILD)/libheapprof.so
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) -std=gnu11 -O1 -g -fno-inline -o $@ $< $(API_LINK)

# Test programs named api_*.c use the API too.
$(BUILD)/progs/api_%: tests/integration/progs/api_%.c \
  include/heapprof/heap_profile.h include/heapprof/heapprof.h \
  $(BUILD)/libheapprof.so
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) -std=gnu11 -O0 -g -fno-inline -pthread -o $@ $< $(API_LINK)

$(BUILD)/bench/%: bench/%.c
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) -std=gnu11 -O2 -g -pthread -o $@ $<

# The cost of an API call: linked like an API program ($$ORIGIN/.. is the
# build dir from $(BUILD)/bench too).
$(BUILD)/bench/api_idle: bench/api_idle.c include/heapprof/heap_profile.h \
  $(BUILD)/libheapprof.so
	@mkdir -p $(dir $@)
	$(call say,CC)$(CC) -std=gnu11 -O2 -g -o $@ $< $(API_LINK)

unit: deps
	@$(SUBMAKE) all $(UNIT_BINS)
	@tests/run-unit.sh $(BUILD)

integration: test-deps
	@$(SUBMAKE) all $(PROG_BINS) $(BUILD)/libheapprof-oracle.so
	@tests/run-integration.sh $(BUILD)

# The quick start's second command.
test: test-deps
	@$(SUBMAKE) all $(UNIT_BINS) $(PROG_BINS) $(BUILD)/libheapprof-oracle.so
	@tests/run-all.sh $(BUILD)

# The quick start's first command: profile the bundled example.
demo: deps
	@$(SUBMAKE) all
	@scripts/demo.sh $(BUILD)

# The Debian package built from the committed tree (dpkg-buildpackage),
# lintian, installed, tried and purged (scripts/deb-test.sh; root).
deb-test: deps
	@scripts/deb-test.sh $(BUILD)/deb

bench: deps
	@$(SUBMAKE) all $(BENCH_BINS)
	@bench/run.sh $(BUILD)

# A few minutes: heapprof's cost per sample counted under cachegrind
# (instructions and L1 data misses, the program's and ours), before/after
# numbers that a noisy machine does not move (bench/cost.sh).
bench-cost: deps
	@$(SUBMAKE) all $(BUILD)/bench/mallocbench
	@bench/cost.sh $(BUILD)

# A few seconds: the custom allocator API's cost with no session.
bench-api: deps
	@$(SUBMAKE) all $(BUILD)/bench/api_idle
	$(BUILD)/bench/api_idle

# About a minute: the event trace of python3 written and read back,
# against heaptrack and heaptrack_print (also part of `make bench`).
bench-trace: deps
	@$(SUBMAKE) all
	@bench/trace_read.sh $(BUILD)

# About 2 minutes: the dump and profile size of 10k, 100k and 1M call
# stacks, the readers on the largest, the daemon per million samples
# (docs/BENCHMARKS.md, "Costs that grow with the work").
bench-scale: deps
	@$(SUBMAKE) all $(BUILD)/bench/manystacks $(BUILD)/bench/runone
	@bench/scale.sh $(BUILD)

# 1.5 to 4 minutes: the time `record -p` takes to attach to a running
# process that never loaded the library, idle and busy, against
# `heaptrack -p` (gdb); BENCH_ATTACH_RUNS repetitions (default 10;
# docs/PERFORMANCE.md, "Attaching to a running process").
bench-attach: deps
	@$(SUBMAKE) all $(BUILD)/bench/attach_target
	@bench/attach.sh $(BUILD)

# DURATION seconds (default 600, 10 minutes): `heapprof serve` over a
# program restarted every few seconds and a long-lived one, scraped as
# Prometheus and a pprof scraper would; the agent's RSS and CPU over time
# (docs/FLEET.md, "What it costs").
.PHONY: bench-serve
bench-serve: deps
	@$(SUBMAKE) all $(BUILD)/bench/serve_churn
	@bench/serve.sh $(BUILD)

# The layout heapprof expects: the library in ../lib from the program
# (src/session/launch.c, session_find_library), the header as <heapprof/...>.  The
# .pc file gets PREFIX, not DESTDIR: DESTDIR is only where a package is
# staged.
INST_BIN := $(DESTDIR)$(PREFIX)/bin
# LIBDIR: the library's directory (Debian's package: /usr/lib/MULTIARCH;
# heapprof looks there, next to itself and in ../lib).
LIBDIR   ?= $(PREFIX)/lib
INST_LIB := $(DESTDIR)$(LIBDIR)
INST_INC := $(DESTDIR)$(PREFIX)/include/heapprof
INST_PC  := $(DESTDIR)$(LIBDIR)/pkgconfig
INST_MAN := $(DESTDIR)$(PREFIX)/share/man
INST_BASH := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
INST_ZSH  := $(DESTDIR)$(PREFIX)/share/zsh/site-functions
INST_UNIT := $(DESTDIR)$(PREFIX)/lib/systemd/system

install: all
	install -d $(INST_BIN) $(INST_LIB) $(INST_INC) $(INST_PC)
	install -m 755 $(BUILD)/heapprof $(INST_BIN)/heapprof
	ln -sf heapprof $(INST_BIN)/heapprofd
	install -m 755 $(BUILD)/$(LIB_SONAME) $(INST_LIB)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $(INST_LIB)/libheapprof.so
	if [ -n "$(ABI_FILES)" ]; then \
	  install -d $(INST_LIB)/heapprof-abi/lib/$(MULTIARCH) && \
	  ln -sf ../../../$(LIB_SONAME) $(INST_LIB)/heapprof-abi/lib/$(MULTIARCH)/$(LIB_SONAME); \
	  if [ "$(NO_STUB32)" != 1 ] && [ -f $(ABI_TREE)/lib/i386-linux-gnu/$(LIB_SONAME) ]; then \
	    install -d $(INST_LIB)/heapprof-abi/lib/i386-linux-gnu && \
	    install -m 644 $(ABI_TREE)/lib/i386-linux-gnu/$(LIB_SONAME) \
	      $(INST_LIB)/heapprof-abi/lib/i386-linux-gnu/$(LIB_SONAME) && \
	    install -d $(INST_LIB)/heapprof-abi/lib32 && \
	    ln -sf ../lib/i386-linux-gnu/$(LIB_SONAME) $(INST_LIB)/heapprof-abi/lib32/$(LIB_SONAME); \
	  fi; \
	fi
	install -m 644 include/heapprof/heap_profile.h $(INST_INC)/heap_profile.h
	install -m 644 include/heapprof/heapprof.h $(INST_INC)/heapprof.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	  -e 's|@VERSION@|$(VERSION)|g' \
	  heapprof.pc.in >$(INST_PC)/heapprof.pc.tmp
	chmod 644 $(INST_PC)/heapprof.pc.tmp
	mv -f $(INST_PC)/heapprof.pc.tmp $(INST_PC)/heapprof.pc
	install -d $(INST_MAN)/man1 $(INST_MAN)/man3 $(INST_MAN)/man8
	install -m 644 $(BUILD)/man/*.1 $(INST_MAN)/man1/
	install -m 644 $(BUILD)/man/heap_profile.h.3 $(INST_MAN)/man3/
	install -m 644 $(BUILD)/man/heapprofd.8 $(INST_MAN)/man8/
	install -d $(INST_BASH) $(INST_ZSH)
	install -m 644 completion/heapprof.bash $(INST_BASH)/heapprof
	ln -sf heapprof $(INST_BASH)/heapprofd
	install -m 644 completion/_heapprof $(INST_ZSH)/_heapprof
	install -d $(INST_UNIT)
	sed -e 's|@PREFIX@|$(PREFIX)|g' systemd/heapprof-serve@.service.in \
	  >$(INST_UNIT)/heapprof-serve@.service.tmp
	chmod 644 $(INST_UNIT)/heapprof-serve@.service.tmp
	mv -f $(INST_UNIT)/heapprof-serve@.service.tmp \
	  $(INST_UNIT)/heapprof-serve@.service

# Exactly what install puts there, and the include directory if that
# leaves it empty (it is ours); bin, lib and lib/pkgconfig may be shared.
uninstall:
	rm -f $(INST_BIN)/heapprof $(INST_BIN)/heapprofd \
	  $(INST_LIB)/$(LIB_SONAME) $(INST_LIB)/libheapprof.so \
	  $(INST_INC)/heap_profile.h $(INST_INC)/heapprof.h \
	  $(INST_PC)/heapprof.pc
	rm -rf $(INST_LIB)/heapprof-abi
	rm -f $(INST_MAN)/man1/heapprof.1 $(INST_MAN)/man1/heapprof-*.1 \
	  $(INST_MAN)/man3/heap_profile.h.3 $(INST_MAN)/man8/heapprofd.8 \
	  $(INST_BASH)/heapprof $(INST_BASH)/heapprofd $(INST_ZSH)/_heapprof \
	  $(INST_UNIT)/heapprof-serve@.service
	[ ! -d $(INST_INC) ] || rmdir --ignore-fail-on-non-empty $(INST_INC)

# Fuzzers (docs/safety/fuzz.md): libFuzzer harnesses fuzz/fuzz_*.c over
# the project's code built with clang, ASan and UBSan into $(BUILD)/fuzz.
# `make fuzz` builds them; `make fuzz-ci` runs each for FUZZ_SECONDS on its
# seed corpus (fuzz/corpus/NAME) and fails on any crash.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE $(WARN) -Isrc -Iinclude -I$(PROTO_GEN) \
                -O1 -g -fno-omit-frame-pointer $(FUZZ_SAN)
FUZZ_NAMES   := $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_BINS    := $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_NAMES))
FUZZ_OBJS    := $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(filter-out src/cli/main.c,$(CLI_SRCS))) \
                $(BUILD)/fuzz/obj/gen/export/profile.pb-c.o

$(BUILD)/fuzz/obj/%.o: %.c $(PROTO_H)
	@mkdir -p $(dir $@)
	$(call say,CC)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(BUILD)/fuzz/obj/gen/export/profile.pb-c.o: $(PROTO_C) $(PROTO_H)
	@mkdir -p $(dir $@)
	$(call say,CC)$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c $(FUZZ_OBJS)
	@mkdir -p $(dir $@)
	$(call say,LD)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJS) $(CLI_LIBS)

.SECONDARY: $(FUZZ_OBJS)
.PHONY: fuzz fuzz-ci
fuzz:
	@scripts/deps.sh --fuzz
	@$(MAKE) --no-print-directory $(FUZZ_BINS)

fuzz-ci: fuzz
	@scripts/fuzz.sh $(BUILD) $(FUZZ_SECONDS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cc')

check-format:
	@command -v clang-format >/dev/null || apt-get install -y -qq clang-format >/dev/null
	@clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h' '*.cc')

# clang-tidy (.clang-tidy) and cppcheck over src/; any finding fails
# (docs/safety/sanitizers.md).  The pprof header is generated first.
lint: deps
	@$(SUBMAKE) $(PROTO_H)
	@scripts/deps.sh --lint
	@scripts/lint.sh $(BUILD)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
