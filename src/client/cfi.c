/*
 * Unwind rules from DWARF call frame information (.eh_frame), worked out
 * once per program counter and cached, for the stack capture inside the
 * profiled program (unwind.c).
 *
 * Why our own and not libunwind or libgcc: this runs inside malloc, in any
 * thread, in signal handlers, on small stacks.  libunwind validates memory
 * with a pipe it opens in the target (a descriptor the program may reuse;
 * a read() that is a cancellation point) and needs 4-6 KiB of stack;
 * libgcc's unwinder takes the loader's lock on some paths and builds a
 * large context.  What we need is much less: for x86-64 code, where the
 * caller's frame is (the CFA), where the return address and the caller's
 * rbp were saved.  That fits one 64-bit word per pc (struct cfi_rule),
 * looked up in a lock-free hash table: a hit costs a few loads, a miss
 * finds the FDE through _dl_find_object (glibc 2.35: lock-free,
 * async-signal-safe) and the object's .eh_frame_hdr search table, and
 * runs the CIE's and FDE's instructions up to the pc.  No system call, no
 * lock, no allocation, a few hundred bytes of stack.
 *
 * What a rule can say (anything else stops the unwind there, and the
 * capture counts it):
 *   CFA   rsp + off | rbp + off | *(rbp + off) (stack realignment)
 *         DWARF expressions that are linear in rsp given the pc (PLT
 *         stubs) are evaluated at fill time into rsp + off.
 *   rbp   unchanged | saved at CFA + off | saved at rbp + off | unknown
 *   RA    saved at CFA + off | undefined (the outermost frame)
 * plus kinds of their own: a signal frame (the sigreturn trampoline:
 * an FDE marked 'S' over the kernel's sigreturn code), no CFI for
 * this pc (the capture may fall back to the frame-pointer chain), and
 * unsupported.
 *
 * The table's keys carry a generation that dlclose() bumps (hooks.c), so
 * rules of an unloaded object never serve code loaded later at the same
 * address.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "client/client.h"

/* DWARF pointer encodings (DW_EH_PE_*). */
#define PE_ABSPTR   0x00
#define PE_ULEB128  0x01
#define PE_UDATA2   0x02
#define PE_UDATA4   0x03
#define PE_UDATA8   0x04
#define PE_SLEB128  0x09
#define PE_SDATA2   0x0a
#define PE_SDATA4   0x0b
#define PE_SDATA8   0x0c
#define PE_PCREL    0x10
#define PE_DATAREL  0x30
#define PE_INDIRECT 0x80
#define PE_OMIT     0xff

/* x86-64 DWARF register numbers. */
#define R_RBP 6
#define R_RSP 7
#define R_RA  16

/* How far the interpreter goes: bounds on a malformed or hostile FDE. */
#define CFI_MAX_INSNS   4096
#define CFI_STATE_STACK 4

/* ---- the rule cache ------------------------------------------------- */

struct cache_ent {
	_Atomic uint64_t key; /* 0 empty, CACHE_BUSY while written */
	_Atomic uint64_t val; /* struct cfi_rule */
};
#define CACHE_BITS  16
#define CACHE_SIZE  (1u << CACHE_BITS)
#define CACHE_PROBE 4
#define CACHE_BUSY  UINT64_MAX

static struct cache_ent *cache;
static _Atomic uint32_t cache_gen; /* bumped by cfi_forget (dlclose) */

/* Mapped at the first attach (mmap is async-signal-safe; a process that
 * is never profiled never pays for it).  1 MiB of address space, touched
 * page by page as rules are filled. */
void cfi_init(void)
{
	if (__atomic_load_n(&cache, __ATOMIC_ACQUIRE))
		return;
	void *m = mmap(NULL, CACHE_SIZE * sizeof(struct cache_ent),
	               PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return; /* rules are then worked out every time */
	void *expect = NULL;
	if (!__atomic_compare_exchange_n(&cache, &expect, m, false,
	                                 __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
		munmap(m, CACHE_SIZE * sizeof(struct cache_ent));
}

void cfi_forget(void)
{
	atomic_fetch_add_explicit(&cache_gen, 1, memory_order_release);
}

uint32_t cfi_generation(void)
{
	return atomic_load_explicit(&cache_gen, memory_order_acquire);
}

static inline uint64_t cache_key(uintptr_t pc, bool exact)
{
	return cfi_l1_key(
	        pc, exact,
	        atomic_load_explicit(&cache_gen, memory_order_acquire));
}

static inline uint32_t cache_hash(uint64_t key)
{
	return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - CACHE_BITS));
}

static bool cache_get(uint64_t key, struct cfi_rule *out)
{
	struct cache_ent *c = __atomic_load_n(&cache, __ATOMIC_ACQUIRE);
	if (!c)
		return false;
	uint32_t h = cache_hash(key);
	for (uint32_t i = 0; i < CACHE_PROBE; i++) {
		struct cache_ent *e = &c[(h + i) & (CACHE_SIZE - 1)];
		uint64_t k =
		        atomic_load_explicit(&e->key, memory_order_acquire);
		if (k == 0)
			return false;
		if (k != key)
			continue;
		uint64_t v =
		        atomic_load_explicit(&e->val, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&e->key, memory_order_relaxed) != key)
			return false;
		memcpy(out, &v, sizeof(v));
		return true;
	}
	return false;
}

/* A writer claims a slot by CAS to CACHE_BUSY, so two writers never mix
 * their words; a reader that sees the key change around its read of the
 * value takes it as a miss.  A full probe window replaces one entry. */
static void cache_put(uint64_t key, struct cfi_rule r)
{
	struct cache_ent *c = __atomic_load_n(&cache, __ATOMIC_ACQUIRE);
	if (!c)
		return;
	uint64_t v;
	memcpy(&v, &r, sizeof(v));
	uint32_t h = cache_hash(key);
	struct cache_ent *e = NULL;
	uint64_t seen = 0;
	for (uint32_t i = 0; i < CACHE_PROBE; i++) {
		struct cache_ent *x = &c[(h + i) & (CACHE_SIZE - 1)];
		uint64_t k =
		        atomic_load_explicit(&x->key, memory_order_relaxed);
		if (k == key)
			return; /* another thread filled it */
		if (k == 0) {
			e = x;
			seen = 0;
			break;
		}
	}
	if (!e) {
		e = &c[(h + ((uint32_t)(key >> 4) & (CACHE_PROBE - 1))) &
		       (CACHE_SIZE - 1)];
		seen = atomic_load_explicit(&e->key, memory_order_relaxed);
		if (seen == CACHE_BUSY)
			return;
	}
	if (!atomic_compare_exchange_strong_explicit(&e->key, &seen, CACHE_BUSY,
	                                             memory_order_acquire,
	                                             memory_order_relaxed))
		return;
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&e->val, v, memory_order_relaxed);
	atomic_store_explicit(&e->key, key, memory_order_release);
}

/* ---- reading .eh_frame ---------------------------------------------- */

struct rd {
	const uint8_t *p, *end;
	bool ok;
};

static uint64_t rd_uleb(struct rd *r)
{
	uint64_t v = 0;
	unsigned shift = 0;
	while (r->p < r->end) {
		uint8_t b = *r->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return v;
	}
	r->ok = false;
	return 0;
}

static int64_t rd_sleb(struct rd *r)
{
	int64_t v = 0;
	unsigned shift = 0;
	while (r->p < r->end) {
		uint8_t b = *r->p++;
		if (shift < 64)
			v |= (int64_t)((uint64_t)(b & 0x7f) << shift);
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				v |= (int64_t)(~(uint64_t)0 << shift);
			return v;
		}
	}
	r->ok = false;
	return 0;
}

static uint64_t rd_fixed(struct rd *r, unsigned n)
{
	if ((size_t)(r->end - r->p) < n) {
		r->ok = false;
		return 0;
	}
	uint64_t v = 0;
	memcpy(&v, r->p, n); /* little-endian */
	r->p += n;
	return v;
}

static uint8_t rd_u8(struct rd *r)
{
	return (uint8_t)rd_fixed(r, 1);
}

/* One encoded pointer.  datarel is relative to `data` (the .eh_frame_hdr
 * for its table); indirect pointers are not followed (only the
 * personality routine uses them, and we only skip it). */
static uintptr_t rd_enc(struct rd *r, uint8_t enc, uintptr_t data)
{
	if (enc == PE_OMIT)
		return 0;
	uintptr_t at = (uintptr_t)r->p;
	uint64_t v;
	switch (enc & 0x0f) {
	case PE_ABSPTR:
	case PE_UDATA8:
	case PE_SDATA8:
		v = rd_fixed(r, 8);
		break;
	case PE_ULEB128:
		v = rd_uleb(r);
		break;
	case PE_SLEB128:
		v = (uint64_t)rd_sleb(r);
		break;
	case PE_UDATA2:
		v = rd_fixed(r, 2);
		break;
	case PE_SDATA2:
		v = (uint64_t)(int64_t)(int16_t)rd_fixed(r, 2);
		break;
	case PE_UDATA4:
		v = rd_fixed(r, 4);
		break;
	case PE_SDATA4:
		v = (uint64_t)(int64_t)(int32_t)rd_fixed(r, 4);
		break;
	default:
		r->ok = false;
		return 0;
	}
	switch (enc & 0x70) {
	case 0:
		break;
	case PE_PCREL:
		v += at;
		break;
	case PE_DATAREL:
		v += data;
		break;
	default:
		r->ok = false; /* textrel, funcrel, aligned: not on x86-64 */
		return 0;
	}
	return (uintptr_t)v;
}

/* The FDE covering pc, by the binary-search table of .eh_frame_hdr. */
static __attribute__((noinline)) const uint8_t *find_fde(const uint8_t *hdr,
                                                         uintptr_t pc)
{
	if (!hdr || hdr[0] != 1)
		return NULL;
	uint8_t ptr_enc = hdr[1], cnt_enc = hdr[2], tab_enc = hdr[3];
	struct rd r = {hdr + 4, hdr + 4 + 16, true};
	(void)rd_enc(&r, ptr_enc, (uintptr_t)hdr);
	uint64_t count = rd_enc(&r, cnt_enc, (uintptr_t)hdr);
	/* Every linker writes datarel sdata4 pairs; anything else is
	 * treated as no CFI. */
	if (!r.ok || cnt_enc == PE_OMIT ||
	    tab_enc != (PE_DATAREL | PE_SDATA4) || count == 0 ||
	    count > (1u << 28))
		return NULL;
	const int32_t *tab = (const int32_t *)(const void *)r.p;
	intptr_t rel = (intptr_t)(pc - (uintptr_t)hdr);
	uint64_t lo = 0, hi = count;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if ((intptr_t)tab[2 * mid] <= rel)
			lo = mid;
		else
			hi = mid;
	}
	if ((intptr_t)tab[2 * lo] > rel)
		return NULL;
	return hdr + tab[2 * lo + 1];
}

/* What the CIE says about every FDE that points at it. */
struct cie {
	const uint8_t *insns, *insns_end;
	uint32_t code_align;
	int32_t data_align;
	uint32_t ra_reg;
	uint8_t fde_enc;
	bool has_aug_data;
	bool signal;
};

/* The start and end of an .eh_frame record (CIE or FDE) and where its
 * body begins (after the 4-byte id / CIE pointer). */
static bool record_span(const uint8_t *rec, const uint8_t **body,
                        const uint8_t **end, uint32_t *id)
{
	uint32_t len32;
	memcpy(&len32, rec, 4);
	const uint8_t *p = rec + 4;
	uint64_t len = len32;
	if (len32 == 0xffffffffu) {
		memcpy(&len, p, 8);
		p += 8;
	}
	if (len < 4 || len > (1u << 24))
		return false;
	*end = p + len;
	memcpy(id, p, 4);
	*body = p + 4;
	return true;
}

static __attribute__((noinline)) bool parse_cie(const uint8_t *rec,
                                                struct cie *c)
{
	const uint8_t *body, *end;
	uint32_t id;
	if (!record_span(rec, &body, &end, &id) || id != 0)
		return false;
	struct rd r = {body, end, true};
	uint8_t version = rd_u8(&r);
	if (version != 1 && version != 3)
		return false;
	const char *aug = (const char *)r.p;
	size_t alen = strnlen(aug, (size_t)(end - r.p));
	if (aug[alen] != '\0' && r.p + alen >= end)
		return false;
	r.p += alen + 1;
	if (aug[0] == 'e' && aug[1] == 'h')
		return false; /* GCC 2.x's "eh": not seen in 30 years */
	uint64_t ca = rd_uleb(&r);
	int64_t da = rd_sleb(&r);
	uint64_t ra = version == 1 ? rd_u8(&r) : rd_uleb(&r);
	if (ca == 0 || ca > 64 || da < -64 || da > 64 || ra > 64)
		return false;
	c->code_align = (uint32_t)ca;
	c->data_align = (int32_t)da;
	c->ra_reg = (uint32_t)ra;
	c->fde_enc = PE_ABSPTR;
	c->has_aug_data = aug[0] == 'z';
	c->signal = false;
	const uint8_t *aug_end = NULL;
	if (c->has_aug_data) {
		uint64_t n = rd_uleb(&r);
		if (!r.ok || n > (uint64_t)(end - r.p))
			return false;
		aug_end = r.p + n;
		for (size_t i = 1; i < alen; i++) {
			switch (aug[i]) {
			case 'R':
				c->fde_enc = rd_u8(&r);
				break;
			case 'L':
				(void)rd_u8(&r);
				break;
			case 'P': {
				uint8_t penc = rd_u8(&r);
				(void)rd_enc(&r, (uint8_t)(penc & ~PE_INDIRECT),
				             0);
				break;
			}
			case 'S':
				c->signal = true;
				break;
			case 'B':
			case 'G':
				break;
			default:
				return false;
			}
		}
		r.p = aug_end;
	}
	if (!r.ok)
		return false;
	c->insns = r.p;
	c->insns_end = end;
	return true;
}

/* ---- the interpreter ------------------------------------------------ */

/* CFA_REG: a register the walk does not track (r11 while rustc's inline
 * stack probe runs, say); its offset still counts, so a later
 * def_cfa_register to rsp or rbp makes the rule whole again.  CFA_BAD
 * (an expression not followed) stays bad. */
enum { CFA_SP = 0, CFA_BP = 1, CFA_DEREF_BP = 2, CFA_BAD = 3, CFA_REG = 4 };
enum { RA_AT = 0, RA_UNDEF = 1, RA_BAD = 2 };

/* Offsets beyond int32 are not followed (marked bad). */
struct row {
	int32_t cfa_off;
	int32_t bp_off;
	int32_t ra_off;
	uint8_t cfa, bp, ra;
};

/* v * align, or 0 and not ok when that does not fit (a malformed FDE):
 * never a signed overflow. */
static inline int64_t scaled(int64_t v, int64_t align, bool *ok)
{
	int64_t out;
	if (v > INT32_MAX || v < INT32_MIN ||
	    __builtin_mul_overflow(v, align, &out)) {
		*ok = false;
		return 0;
	}
	return out;
}

static inline int32_t clamp32(int64_t v, bool *ok)
{
	if (v < INT32_MIN || v > INT32_MAX) {
		*ok = false;
		return 0;
	}
	return (int32_t)v;
}

/* A DWARF expression for the CFA that only reads rsp and constants, given
 * pc (the PLT's "rsp + 8 + ((rip & 15) >= 11) * 8" is the one in every
 * executable): evaluated twice with two values of rsp; linear in rsp means
 * rsp + off.  Returns false for anything else. */
static __attribute__((noinline)) bool eval_sp_linear(const uint8_t *p,
                                                     const uint8_t *end,
                                                     uintptr_t pc, int64_t *off,
                                                     uint64_t *st)
{
	/* Unsigned arithmetic throughout: a hostile expression may overflow,
	 * which must not be undefined behaviour here. */
	uint64_t res[2];
	for (int pass = 0; pass < 2; pass++) {
		uint64_t sp = pass ? 4096 : 0;
		int n = 0;
		struct rd r = {p, end, true};
		while (r.ok && r.p < r.end) {
			uint8_t op = rd_u8(&r);
			uint64_t a, b;
			if (op >= 0x30 && op <= 0x4f) { /* lit0..31 */
				if (n == 8)
					return false;
				st[n++] = op - 0x30u;
				continue;
			}
			switch (op) {
			case 0x77: /* breg7 (rsp) */
			case 0x80: /* breg16 (rip) */
				if (n == 8)
					return false;
				st[n++] = (op == 0x77 ? sp : pc) +
				          (uint64_t)rd_sleb(&r);
				continue;
			case 0x08: /* const1u */
			case 0x09: /* const1s */
			case 0x0a: /* const2u */
			case 0x0b: /* const2s */
			case 0x0c: /* const4u */
			case 0x0d: /* const4s */
			case 0x10: /* constu */
			case 0x11: /* consts */
				if (n == 8)
					return false;
				if (op == 0x10)
					a = rd_uleb(&r);
				else if (op == 0x11)
					a = (uint64_t)rd_sleb(&r);
				else {
					unsigned bytes = 1u
					                 << ((op - 0x08) / 2);
					a = rd_fixed(&r, bytes);
					if (op & 1) { /* signed: extend */
						unsigned sh = 64 - 8 * bytes;
						a = (uint64_t)((int64_t)(a
						                         << sh) >>
						               sh);
					}
				}
				st[n++] = a;
				continue;
			case 0x23: /* plus_uconst */
				if (n < 1)
					return false;
				st[n - 1] += rd_uleb(&r);
				continue;
			default:
				break;
			}
			if (n < 2)
				return false;
			b = st[--n];
			a = st[n - 1];
			int64_t sa = (int64_t)a, sb = (int64_t)b;
			switch (op) {
			case 0x1a:
				a &= b;
				break; /* and */
			case 0x21:
				a |= b;
				break; /* or */
			case 0x22:
				a += b;
				break; /* plus */
			case 0x1c:
				a -= b;
				break; /* minus */
			case 0x1e:
				a *= b;
				break; /* mul */
			case 0x24:
				a <<= (b & 63);
				break; /* shl */
			case 0x25:
				a >>= (b & 63);
				break; /* shr */
			case 0x29:
				a = sa == sb;
				break; /* eq */
			case 0x2a:
				a = sa >= sb;
				break; /* ge */
			case 0x2b:
				a = sa > sb;
				break; /* gt */
			case 0x2c:
				a = sa <= sb;
				break; /* le */
			case 0x2d:
				a = sa < sb;
				break; /* lt */
			case 0x2e:
				a = sa != sb;
				break; /* ne */
			default:
				return false;
			}
			st[n - 1] = a;
		}
		if (!r.ok || n != 1)
			return false;
		res[pass] = st[0];
	}
	if (res[1] - res[0] != 4096)
		return false;
	*off = (int64_t)res[0];
	return true;
}

/* "DW_OP_bregN off" alone: the register and the offset. */
static bool expr_breg(const uint8_t *p, const uint8_t *end, unsigned *reg,
                      int64_t *off)
{
	struct rd r = {p, end, true};
	uint8_t op = rd_u8(&r);
	if (op < 0x70 || op > 0x8f)
		return false;
	*reg = op - 0x70u;
	*off = rd_sleb(&r);
	return r.ok && r.p == end;
}

/* Runs instructions [p, end) while their location is <= target. */
static __attribute__((noinline)) bool
run_cfi(const uint8_t *p, const uint8_t *end, const struct cie *c,
        uintptr_t loc, uintptr_t target, struct row *row,
        const struct row *init, struct row *stack, uint64_t *st)
{
	int depth = 0;
	struct rd r = {p, end, true};
	unsigned ninsn = 0;
	while (r.p < r.end) {
		if (++ninsn > CFI_MAX_INSNS)
			return false;
		uint8_t op = rd_u8(&r);
		uint8_t hi2 = op & 0xc0, lo6 = op & 0x3f;
		uint64_t reg = 0;
		int64_t off = 0;
		if (hi2 == 0x40) { /* advance_loc */
			loc += lo6 * c->code_align;
			if (loc > target)
				return true;
			continue;
		}
		if (hi2 == 0x80) { /* offset */
			reg = lo6;
			off = scaled((int64_t)rd_uleb(&r), c->data_align,
			             &r.ok);
			goto set_offset;
		}
		if (hi2 == 0xc0) { /* restore */
			reg = lo6;
			goto restore;
		}
		switch (op) {
		case 0x00: /* nop */
			continue;
		case 0x01: /* set_loc */
			loc = rd_enc(&r, c->fde_enc, 0);
			if (loc > target)
				return true;
			continue;
		case 0x02: /* advance_loc1 */
		case 0x03: /* advance_loc2 */
		case 0x04: /* advance_loc4 */
			loc += rd_fixed(&r, op == 0x02   ? 1
			                    : op == 0x03 ? 2
			                                 : 4) *
			       c->code_align;
			if (loc > target)
				return true;
			continue;
		case 0x05: /* offset_extended */
			reg = rd_uleb(&r);
			off = scaled((int64_t)rd_uleb(&r), c->data_align,
			             &r.ok);
			goto set_offset;
		case 0x11: /* offset_extended_sf */
			reg = rd_uleb(&r);
			off = scaled(rd_sleb(&r), c->data_align, &r.ok);
			goto set_offset;
		case 0x2f: /* GNU_negative_offset_extended */
			reg = rd_uleb(&r);
			off = -scaled((int64_t)rd_uleb(&r), c->data_align,
			              &r.ok);
			goto set_offset;
		case 0x06: /* restore_extended */
			reg = rd_uleb(&r);
			goto restore;
		case 0x07: /* undefined */
			reg = rd_uleb(&r);
			if (reg == R_RA)
				row->ra = RA_UNDEF;
			else if (reg == R_RBP)
				row->bp = BP_LOST;
			continue;
		case 0x08: /* same_value */
			reg = rd_uleb(&r);
			if (reg == R_RBP)
				row->bp = BP_SAME;
			else if (reg == R_RA)
				row->ra = RA_BAD;
			continue;
		case 0x09: /* register */
			reg = rd_uleb(&r);
			(void)rd_uleb(&r);
			if (reg == R_RBP)
				row->bp = BP_LOST;
			else if (reg == R_RA)
				row->ra = RA_BAD;
			continue;
		case 0x0a: /* remember_state */
			if (depth == CFI_STATE_STACK)
				return false;
			stack[depth++] = *row;
			continue;
		case 0x0b: /* restore_state */
			if (depth == 0)
				return false;
			{
				/* The CFA is not part of the remembered
				 * register rules in DWARF 5, but GCC and every
				 * consumer restore it too. */
				*row = stack[--depth];
			}
			continue;
		case 0x0c: /* def_cfa */
			reg = rd_uleb(&r);
			row->cfa_off = clamp32((int64_t)rd_uleb(&r), &r.ok);
			goto set_cfa_reg;
		case 0x12: /* def_cfa_sf */
			reg = rd_uleb(&r);
			row->cfa_off = clamp32(
			        scaled(rd_sleb(&r), c->data_align, &r.ok),
			        &r.ok);
			goto set_cfa_reg;
		case 0x0d: /* def_cfa_register */
			reg = rd_uleb(&r);
			if (row->cfa == CFA_DEREF_BP || row->cfa == CFA_BAD) {
				row->cfa = CFA_BAD;
				continue;
			}
			goto set_cfa_reg;
		case 0x0e: /* def_cfa_offset */
			row->cfa_off = clamp32((int64_t)rd_uleb(&r), &r.ok);
			if (row->cfa == CFA_DEREF_BP)
				row->cfa = CFA_BAD;
			continue;
		case 0x13: /* def_cfa_offset_sf */
			row->cfa_off = clamp32(
			        scaled(rd_sleb(&r), c->data_align, &r.ok),
			        &r.ok);
			if (row->cfa == CFA_DEREF_BP)
				row->cfa = CFA_BAD;
			continue;
		case 0x0f: { /* def_cfa_expression */
			uint64_t n = rd_uleb(&r);
			if (!r.ok || n > (uint64_t)(r.end - r.p))
				return false;
			const uint8_t *e = r.p;
			r.p += n;
			unsigned breg;
			int64_t boff;
			/* Stack realignment: CFA = *(rbp + off). */
			if (n >= 2 && e[n - 1] == 0x06 &&
			    expr_breg(e, e + n - 1, &breg, &boff) &&
			    breg == R_RBP) {
				row->cfa = CFA_DEREF_BP;
				row->cfa_off = clamp32(boff, &r.ok);
			} else if (eval_sp_linear(e, e + n, target, &boff,
			                          st)) {
				row->cfa = CFA_SP;
				row->cfa_off = clamp32(boff, &r.ok);
			} else {
				row->cfa = CFA_BAD;
			}
			continue;
		}
		case 0x10:   /* expression */
		case 0x16: { /* val_expression */
			reg = rd_uleb(&r);
			uint64_t n = rd_uleb(&r);
			if (!r.ok || n > (uint64_t)(r.end - r.p))
				return false;
			const uint8_t *e = r.p;
			r.p += n;
			unsigned breg;
			int64_t boff;
			if (reg == R_RBP) {
				if (op == 0x10 &&
				    expr_breg(e, e + n, &breg, &boff) &&
				    breg == R_RBP) {
					row->bp = BP_AT_BP;
					row->bp_off = clamp32(boff, &r.ok);
				} else {
					row->bp = BP_LOST;
				}
			} else if (reg == R_RA) {
				row->ra = RA_BAD;
			}
			continue;
		}
		case 0x14: /* val_offset */
		case 0x15: /* val_offset_sf */
			reg = rd_uleb(&r);
			if (op == 0x14)
				(void)rd_uleb(&r);
			else
				(void)rd_sleb(&r);
			if (reg == R_RBP)
				row->bp = BP_LOST;
			else if (reg == R_RA)
				row->ra = RA_BAD;
			continue;
		case 0x2e: /* GNU_args_size */
			(void)rd_uleb(&r);
			continue;
		default:
			return false;
		}
	set_offset:
		if (reg == R_RBP) {
			row->bp = BP_AT_CFA;
			row->bp_off = clamp32(off, &r.ok);
		} else if (reg == R_RA) {
			row->ra = RA_AT;
			row->ra_off = clamp32(off, &r.ok);
		}
		continue;
	restore:
		if (reg == R_RBP) {
			row->bp = init->bp;
			row->bp_off = init->bp_off;
		} else if (reg == R_RA) {
			row->ra = init->ra;
			row->ra_off = init->ra_off;
		}
		continue;
	set_cfa_reg:
		if (reg == R_RSP)
			row->cfa = CFA_SP;
		else if (reg == R_RBP)
			row->cfa = CFA_BP;
		else
			row->cfa = CFA_REG;
		continue;
	}
	return r.ok;
}

/* The kernel's x86-64 sigreturn trampoline: mov $15, %rax; syscall. */
static bool is_sigreturn(uintptr_t pc)
{
	static const uint8_t code[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00,
	                                0x00, 0x00, 0x0f, 0x05};
	return memcmp((const void *)pc, code, sizeof(code)) == 0;
}

static struct cfi_rule make_rule(unsigned kind)
{
	struct cfi_rule r = {0};
	r.kind = (uint8_t)kind;
	return r;
}

/* A rule the capture's tight loop steps (unwind.c): CFA = sp + a multiple
 * of 8 that is at least 8, the return address in the word below the CFA,
 * the caller's rbp unchanged or saved in a word between sp and the return
 * address.  From an 8-aligned sp inside the stack, such a step reads
 * aligned words in [sp, CFA) and needs only CFA <= the stack's top
 * checked; where it read, relative to sp, is a constant of the rule (the
 * memo's offsets). */
static bool is_fast(struct cfi_rule r)
{
	if (r.kind != CFI_FRAME || r.cfa != CFI_CFA_SP || r.ra_off8 != -1 ||
	    r.cfa_off < 8 || r.cfa_off % 8 || r.cfa_off > (1 << 20))
		return false;
	if (r.bp == BP_SAME)
		return true;
	return r.bp == BP_AT_CFA && r.bp_off % 8 == 0 && r.bp_off <= -16 &&
	       r.cfa_off + r.bp_off >= 0 && r.cfa_off + r.bp_off < 0xfffe;
}

/* Works out the rule for pc; `exact` when pc is the address of the
 * instruction to run next (the leaf, a frame a signal interrupted), not a
 * return address. */
/* fill's working memory: in the capture context (client.h), so that a
 * rule worked out inside a hook costs the program's stack only fill's few
 * saved registers. */
struct cfi_work {
	struct dl_find_object fo;
	struct cie c;
	struct row row, init;
	struct row stack[CFI_STATE_STACK];
	uint64_t st[8];
};
_Static_assert(sizeof(struct cfi_work) <=
                       sizeof(((struct capture_ctx *)0)->cfi_work),
               "cfi_work fits the capture context");

static __attribute__((noinline)) struct cfi_rule fill(uintptr_t pc, bool exact,
                                                      struct cfi_work *w)
{
	uintptr_t target = exact ? pc : pc - 1;
	if (_dl_find_object((void *)target, &w->fo) != 0)
		return make_rule(CFI_NOMODULE);
	const uint8_t *fde = find_fde(w->fo.dlfo_eh_frame, target);
	if (!fde)
		return make_rule(CFI_NOCFI);
	const uint8_t *body, *end;
	uint32_t cie_off;
	if (!record_span(fde, &body, &end, &cie_off) || cie_off == 0)
		return make_rule(CFI_NOCFI);
	struct cie *cp = &w->c;
	if (!parse_cie(body - 4 - cie_off, cp))
		return make_rule(CFI_BAD);
	struct rd r = {body, end, true};
	uintptr_t start = rd_enc(&r, cp->fde_enc, 0);
	uintptr_t range = rd_enc(&r, (uint8_t)(cp->fde_enc & 0x0f), 0);
	if (!r.ok || target < start || target - start >= range)
		return make_rule(CFI_NOCFI);
	if (cp->has_aug_data) {
		uint64_t n = rd_uleb(&r);
		if (!r.ok || n > (uint64_t)(end - r.p))
			return make_rule(CFI_BAD);
		r.p += n;
	}
	if (cp->ra_reg != R_RA)
		return make_rule(CFI_BAD);
	/* A signal frame's FDE (glibc's __restore_rt, "zRS") starts one
	 * byte early, so a return address there finds it.  A signal can also
	 * interrupt the trampoline itself, at its mov (the handler has just
	 * returned to it) or at its syscall: an exact pc there, with sp at
	 * the same ucontext.  Its code is read only inside the range the FDE
	 * says is code. */
	if (cp->signal) {
		uintptr_t off = pc - start, tramp = off;
		if (exact && off >= 8 && off + 2 <= range &&
		    is_sigreturn(pc - 7))
			tramp = off - 7;
		return make_rule(tramp >= 1 && tramp + 9 <= range &&
		                                 is_sigreturn(start + tramp)
		                         ? CFI_SIGNAL
		                         : CFI_BAD);
	}

	struct row *rw = &w->row;
	*rw = (struct row){.cfa = CFA_BAD, .bp = BP_SAME, .ra = RA_BAD};
	if (!run_cfi(cp->insns, cp->insns_end, cp, start, target, rw, rw,
	             w->stack, w->st))
		return make_rule(CFI_BAD);
	w->init = *rw;
	if (!run_cfi(r.p, end, cp, start, target, rw, &w->init, w->stack,
	             w->st))
		return make_rule(CFI_BAD);

	if (rw->ra == RA_UNDEF)
		return make_rule(CFI_END);
	if (rw->ra != RA_AT || rw->cfa == CFA_BAD || rw->cfa == CFA_REG)
		return make_rule(CFI_BAD);
	struct cfi_rule out = make_rule(CFI_FRAME);
	if (rw->ra_off % 8 || rw->ra_off < -1024 || rw->ra_off > 1016)
		return make_rule(CFI_BAD);
	out.cfa = rw->cfa;
	out.cfa_off = rw->cfa_off;
	out.ra_off8 = (int8_t)(rw->ra_off / 8);
	out.bp = rw->bp;
	if (rw->bp == BP_AT_CFA || rw->bp == BP_AT_BP) {
		if (rw->bp_off < INT16_MIN || rw->bp_off > INT16_MAX)
			out.bp = BP_LOST;
		else
			out.bp_off = (int16_t)rw->bp_off;
	}
	out.fast = is_fast(out);
	return out;
}

/* Outside a hook (the exit's signal-frame check): on our own stack. */
static __attribute__((noinline)) struct cfi_rule fill_here(uintptr_t pc,
                                                           bool exact)
{
	struct cfi_work w;
	return fill(pc, exact, &w);
}

/*
 * Three levels: the capture context's last rules (direct-mapped, no
 * atomics: a context has one user at a time), the shared cache, the CFI
 * itself.
 */
struct cfi_rule cfi_rule_for(struct capture_ctx *t, uintptr_t pc, bool exact)
{
	struct cfi_rule r;
	if (pc >> 48)
		return make_rule(CFI_NOMODULE);
	uint64_t key = cache_key(pc, exact);
	uint32_t i = cfi_l1_slot(pc);
	if (HP_LIKELY(t && t->rules[i].key == key)) {
		memcpy(&r, &t->rules[i].rule, sizeof(r));
		return r;
	}
	if (!cache_get(key, &r)) {
		r = t ? fill(pc, exact, (struct cfi_work *)(void *)t->cfi_work)
		      : fill_here(pc, exact);
		/* A pc outside every object may be code loaded later (or
		 * JIT code that moves): not cached. */
		if (r.kind == CFI_NOMODULE)
			return r;
		cache_put(key, r);
	}
	if (t) {
		memcpy(&t->rules[i].rule, &r, sizeof(r));
		t->rules[i].key = key;
	}
	return r;
}
