/*
 * Routing a process the collector injected this library into (issue 21,
 * docs/ATTACH.md).  Loaded by dlopen (RTLD_LOCAL), the library preempts
 * nothing: route_all has got.c point every loaded object's relocation
 * slots for the functions this library exports (the malloc family,
 * operator new and delete, and the functions the stack capture, the
 * seccomp check and the child note must hear of) at our definitions.
 *
 * Objects loaded later.  A dlopen wrapper would change what dlopen does:
 * glibc finds the caller's object from dlopen's return address, and its
 * DT_RPATH, DT_RUNPATH, $ORIGIN and namespace decide where a name is
 * searched; a wrapper in this library would make the search ours.  So
 * dlopen, dlmopen, dlsym and dlvsym get trampolines instead: each
 * patches the objects loaded since the last pass (got_patch_new, at once
 * when the loader's counters did not move), then jumps to the real
 * function with the registers and the return address as the program
 * passed them.  A library is routed at the program's next dl call after
 * it was loaded; in practice its dlsym, before the program calls into it.
 *
 * Our own definitions are looked up by dlsym on this library's handle
 * (its own scope first): a reference to `malloc` from our code would be
 * bound, like any relocation of an object loaded RTLD_LOCAL, to the
 * global scope's malloc.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "client/client.h"
#include "client/got.h"
#include "client/trampoline.h"

#if defined(__x86_64__)

/* The names routed to the definition of the same name in this library. */
static const char *const own_names[] = {
        "malloc",
        "free",
        "calloc",
        "realloc",
        "reallocarray",
        "memalign",
        "posix_memalign",
        "aligned_alloc",
        "valloc",
        "pvalloc",
        "_Znwm",
        "_Znam",
        "_ZnwmRKSt9nothrow_t",
        "_ZnamRKSt9nothrow_t",
        "_ZnwmSt11align_val_t",
        "_ZnamSt11align_val_t",
        "_ZnwmSt11align_val_tRKSt9nothrow_t",
        "_ZnamSt11align_val_tRKSt9nothrow_t",
        "_ZdlPv",
        "_ZdaPv",
        "_ZdlPvm",
        "_ZdaPvm",
        "_ZdlPvRKSt9nothrow_t",
        "_ZdaPvRKSt9nothrow_t",
        "_ZdlPvSt11align_val_t",
        "_ZdaPvSt11align_val_t",
        "_ZdlPvmSt11align_val_t",
        "_ZdaPvmSt11align_val_t",
        "_ZdlPvSt11align_val_tRKSt9nothrow_t",
        "_ZdaPvSt11align_val_tRKSt9nothrow_t",
        "sigaltstack",
        "makecontext",
        "dlclose",
        "prctl",
        "syscall",
        "vfork",
        "posix_spawn",
        "posix_spawnp",
        "system",
        "popen",
};

#define N_OWN (sizeof(own_names) / sizeof(own_names[0]))
#define N_DL  4

/* The real dl functions, for the trampolines (got.c stores them before
 * it patches a slot). */
HP_HIDDEN void *hp_route_real_dlopen, *hp_route_real_dlmopen,
        *hp_route_real_dlsym, *hp_route_real_dlvsym;

HP_HIDDEN void hp_route_dl_note(void);
HP_HIDDEN void hp_route_dl_note(void)
{
	int saved = errno;
	struct got_stats st;
	got_patch_new(&st);
	errno = saved;
}

/* The notes: the objects loaded since the last pass routed, then the
 * real function to jump to. */
#define DL_NOTE(name)                                                          \
	HP_HIDDEN void *hp_route_note_##name(void);                            \
	HP_HIDDEN void *hp_route_note_##name(void)                             \
	{                                                                      \
		hp_route_dl_note();                                            \
		return hp_route_real_##name;                                   \
	}
DL_NOTE(dlopen)
DL_NOTE(dlmopen)
DL_NOTE(dlsym)
DL_NOTE(dlvsym)

/* Each trampoline: the note, then the real function with the registers
 * and the return address as the program passed them (trampoline.h). */
#define DL_TRAMPOLINE(name)                                                    \
	".globl hp_route_" #name "\n"                                          \
	".hidden hp_route_" #name "\n"                                         \
	".type hp_route_" #name ", @function\n"                                \
	"hp_route_" #name ":\n"                                                \
	".cfi_startproc\n" HP_TRAMPOLINE_TO_NOTE(                              \
	        "hp_route_note_" #name) ".cfi_endproc\n"                       \
	                                ".size hp_route_" #name                \
	                                ", .-hp_route_" #name "\n"

__asm__(".text\n" DL_TRAMPOLINE(dlopen) DL_TRAMPOLINE(dlmopen)
                DL_TRAMPOLINE(dlsym) DL_TRAMPOLINE(dlvsym));

HP_HIDDEN void hp_route_dlopen(void);
HP_HIDDEN void hp_route_dlmopen(void);
HP_HIDDEN void hp_route_dlsym(void);
HP_HIDDEN void hp_route_dlvsym(void);

/* got.c keeps the table: it must outlive the call. */
static struct got_entry table[N_OWN + N_DL];
static size_t ntable;

/* Fills the table once: our definitions, by this library's handle. */
static int table_fill(void)
{
	if (ntable)
		return 0;
	Dl_info self;
	if (!dladdr((void *)route_all, &self) || !self.dli_fname)
		return -1;
	void *h = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return -1;
	size_t n = 0;
	for (size_t i = 0; i < N_OWN; i++) {
		void *f = dlsym(h, own_names[i]);
		Dl_info where;
		/* Ours only: a name we do not define here is not routed. */
		if (!f || !dladdr(f, &where) ||
		    where.dli_fbase != self.dli_fbase)
			continue;
		table[n++] = (struct got_entry){
		        .name = own_names[i],
		        .hook = f,
		        .real = hooks_real_slot(own_names[i])};
	}
	dlclose(h);
	table[n++] = (struct got_entry){.name = "dlopen",
	                                .hook = (void *)hp_route_dlopen,
	                                .real = &hp_route_real_dlopen};
	table[n++] = (struct got_entry){.name = "dlmopen",
	                                .hook = (void *)hp_route_dlmopen,
	                                .real = &hp_route_real_dlmopen};
	table[n++] = (struct got_entry){.name = "dlsym",
	                                .hook = (void *)hp_route_dlsym,
	                                .real = &hp_route_real_dlsym};
	table[n++] = (struct got_entry){.name = "dlvsym",
	                                .hook = (void *)hp_route_dlvsym,
	                                .real = &hp_route_real_dlvsym};
	ntable = n;
	return 0;
}

int route_all(struct got_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (table_fill() != 0)
		return -1;
	int rc = got_patch_all(table, ntable, st);
	if (rc == 0)
		hooks_routed();
	return rc;
}

#else

int route_all(struct got_stats *st)
{
	memset(st, 0, sizeof(*st));
	return -1;
}

#endif
