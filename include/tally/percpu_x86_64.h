/* SPDX-License-Identifier: MIT */
#ifndef TALLY_PERCPU_X86_64_H
#define TALLY_PERCPU_X86_64_H

/*
 * tally/percpu_x86_64.h - the restartable sequences of tally/percpu.h for
 * x86-64.  Included by tally/percpu.h, which documents each function;
 * never include it directly.
 */

#ifndef TALLY_PERCPU_H
#error "include <tally/percpu.h>, not <tally/percpu_x86_64.h>"
#endif

#define TALLY_RSEQ_SIG 0x53053053

/*
 * The rseq ABI, x86-64.  The descriptor {version, flags, start_ip,
 * post_commit_offset, abort_ip} goes in section __rseq_cs; the abort
 * handler, preceded by the 4-byte signature, in __rseq_failure.  The
 * sequence stores the descriptor's address into rseq->rseq_cs, reads
 * rseq->cpu_id (negative: this thread has no registration), computes the
 * slot, and ends with the single committing store.  Label 1 starts the
 * sequence, 2 ends it, 3 is the descriptor, 4 the abort entry.
 */
#ifdef TALLY_INJECT
/*
 * Test builds: a delay of tally_inject_rseq_delay iterations inside every
 * sequence, after cpu_id is read and before the commit (in @reg, a
 * register the sequence clobbers), so that signals and preemption land
 * there; each abort is counted in tally_inject_rseq_aborts.  Hidden: the
 * asm reaches the delay RIP-relative, without a register for its address.
 */
extern long tally_inject_rseq_delay __attribute__((visibility("hidden")));
extern unsigned long tally_inject_rseq_aborts
	__attribute__((visibility("hidden")));
#define TALLY_RSEQ_DELAY_(reg)						\
	"movq %[rseq_delay], " reg "\n\t"				\
	"7:\n\t"							\
	"testq " reg ", " reg "\n\t"					\
	"jz 8f\n\t"							\
	"decq " reg "\n\t"						\
	"jmp 7b\n\t"							\
	"8:\n\t"
#define TALLY_RSEQ_DELAY_OPERAND_ , [rseq_delay] "m" (tally_inject_rseq_delay)
#define TALLY_RSEQ_DELAY_CLOBBER_ "rcx",
#define TALLY_RSEQ_COUNT_ABORT_()					\
	__atomic_add_fetch(&tally_inject_rseq_aborts, 1, __ATOMIC_RELAXED)
#else
#define TALLY_RSEQ_DELAY_(reg)
#define TALLY_RSEQ_DELAY_OPERAND_
#define TALLY_RSEQ_DELAY_CLOBBER_
#define TALLY_RSEQ_COUNT_ABORT_() ((void)0)
#endif

/* The start of every sequence; @scratch is free for the test delay. */
#define TALLY_RSEQ_CS_BEGIN_(scratch)					\
	".pushsection __rseq_cs, \"aw\"\n\t"				\
	".balign 32\n\t"						\
	"3:\n\t"							\
	".long 0x0, 0x0\n\t"						\
	".quad 1f, (2f - 1f), 4f\n\t"					\
	".popsection\n\t"						\
	".pushsection __rseq_failure, \"ax\"\n\t"			\
	".byte 0x0f, 0xb9, 0x3d\n\t"					\
	".long 0x53053053\n\t"						\
	"4:\n\t"							\
	"jmp %l[aborted]\n\t"						\
	".popsection\n\t"						\
	"testq %[rseq_off], %[rseq_off]\n\t"				\
	"jz %l[unregistered]\n\t"					\
	"leaq 3b(%%rip), %%rax\n\t"					\
	"movq %%rax, %[rseq_cs]\n\t"					\
	"1:\n\t"							\
	"movl %[cpu_id], %%eax\n\t"					\
	"testl %%eax, %%eax\n\t"					\
	"js %l[unregistered]\n\t"					\
	TALLY_RSEQ_DELAY_(scratch)

/*
 * The thread's rseq area.  Its offset is 0 until tally's constructor set
 * it (an update from an earlier constructor), which would name the thread
 * control block: every sequence first tests the offset and takes its slow
 * path, which sets the mode up, before touching the area.  The test is in
 * the asm, not in C: gcc 12 miscompiles outputs of asm goto statements
 * reached through more C branches (a stale spill slot is read back).
 */
#define TALLY_RSEQ_AREA_(off)						\
	((unsigned char *)__builtin_thread_pointer() + (off))

/**
 * tally_rseq_area_() - internal: the thread's rseq area, once the mode is
 *	set up.
 *
 * Context: MT-safe, async-signal-safe: arithmetic only.
 */
static inline unsigned char *tally_rseq_area_(void)
{
	return TALLY_RSEQ_AREA_(tally_rseq_area_offset);
}

/* Offsets inside struct rseq (linux/rseq.h). */
#define TALLY_RSEQ_CPU_ID_OFFSET 4
#define TALLY_RSEQ_CS_OFFSET 8

/* The rseq area operands of every sequence: offset, rseq_cs, cpu_id. */
#define TALLY_RSEQ_AREA_OPERANDS_(off, rs)				\
	[rseq_off] "r" (off),						\
	[rseq_cs] "m" (*(uint64_t *)((rs) + TALLY_RSEQ_CS_OFFSET)),	\
	[cpu_id] "m" (*(uint32_t *)((rs) + TALLY_RSEQ_CPU_ID_OFFSET))	\
	TALLY_RSEQ_DELAY_OPERAND_

static inline long tally_percpu_add_return(long *ptr, long v,
					   unsigned int *cpu)
{
	ptrdiff_t off = tally_rseq_area_offset;
	unsigned char *rs = TALLY_RSEQ_AREA_(off);
	long res;
	unsigned long c;

retry:
	__asm__ __volatile__ goto(
		TALLY_RSEQ_CS_BEGIN_("%%rcx")
		"movl %%eax, %k[c]\n\t"
		"shlq %[shift], %%rax\n\t"
		"addq %[base], %%rax\n\t"
		"movq (%%rax), %[res]\n\t"
		"addq %[v], %[res]\n\t"
		"movq %[res], (%%rax)\n\t"
		"2:\n\t"
		: [res] "=&r" (res), [c] "=&r" (c)
		: TALLY_RSEQ_AREA_OPERANDS_(off, rs),
		  [base] "r" (ptr), [v] "r" (v),
		  [shift] "i" (TALLY_PERCPU_UNIT_SHIFT)
		: TALLY_RSEQ_DELAY_CLOBBER_ "rax", "memory", "cc"
		: aborted, unregistered);
	*cpu = (unsigned int)c;
	return res;
aborted:
	/* Preempted, migrated or signalled before the commit: redo. */
	TALLY_RSEQ_COUNT_ABORT_();
	goto retry;
unregistered: {
	/* A local of its own: *cpu stays in a register on the fast path. */
	unsigned int slow_cpu;

	res = tally_percpu_add_return_slow(ptr, v, &slow_cpu);
	*cpu = slow_cpu;
	return res;
}
}

static inline void tally_percpu_add(long *ptr, long v)
{
	ptrdiff_t off = tally_rseq_area_offset;
	unsigned char *rs = TALLY_RSEQ_AREA_(off);
	unsigned int cpu;

retry:
	__asm__ __volatile__ goto(
		TALLY_RSEQ_CS_BEGIN_("%%rcx")
		"shlq %[shift], %%rax\n\t"
		"addq %[base], %%rax\n\t"
		"addq %[v], (%%rax)\n\t"
		"2:\n\t"
		:
		: TALLY_RSEQ_AREA_OPERANDS_(off, rs),
		  [base] "r" (ptr), [v] "r" (v),
		  [shift] "i" (TALLY_PERCPU_UNIT_SHIFT)
		: TALLY_RSEQ_DELAY_CLOBBER_ "rax", "memory", "cc"
		: aborted, unregistered);
	return;
aborted:
	TALLY_RSEQ_COUNT_ABORT_();
	goto retry;
unregistered:
	tally_percpu_add_return_slow(ptr, v, &cpu);
}

/*
 * One hint: load the offset, then load, add, store and OR the count at
 * this CPU's base (%rax) + offset.  Straight-line code for up to 8 hints
 * costs about half of a loop over them.
 */
#define TALLY_HINT_(i)							\
	"movq " #i "*8(%[offs]), %%r8\n\t"				\
	"movq (%%rax,%%r8), %%r9\n\t"					\
	"addq %[hint], %%r9\n\t"					\
	"movq %%r9, (%%rax,%%r8)\n\t"					\
	"orq %%r9, %[acc]\n\t"

/* %rax = this CPU's copy of base; remember the CPU; clear the OR. */
#define TALLY_HINTS_PROLOGUE_						\
	"movl %%eax, %k[c]\n\t"					\
	"shlq %[shift], %%rax\n\t"					\
	"addq %[base], %%rax\n\t"					\
	"xorl %k[acc], %k[acc]\n\t"

#define TALLY_HINTS_CS_(hints)						\
	__asm__ __volatile__ goto(					\
		TALLY_RSEQ_CS_BEGIN_("%%r8")				\
		TALLY_HINTS_PROLOGUE_					\
		hints							\
		"addq %[v], (%%rax,%[vofs])\n\t"			\
		"2:\n\t"						\
		: [acc] "=&r" (acc), [c] "=&r" (c)			\
		: TALLY_RSEQ_AREA_OPERANDS_(off, rs),			\
		  [base] "r" (base), [offs] "r" (offs),			\
		  [hint] "r" (hint), [vofs] "r" (vofs), [v] "r" (v),	\
		  [shift] "i" (TALLY_PERCPU_UNIT_SHIFT)			\
		: "rax", "r8", "r9", "memory", "cc"			\
		: aborted, unregistered)

static inline unsigned long tally_percpu_add_hints(long *base,
						   const long *offs,
						   unsigned long nr, long hint,
						   long *ptr, long v,
						   unsigned int *cpu)
{
	ptrdiff_t off = tally_rseq_area_offset;
	unsigned char *rs = TALLY_RSEQ_AREA_(off);
	long vofs = (char *)ptr - (char *)base;
	unsigned long acc, c;

retry:
	switch (nr) {
	case 1:
		TALLY_HINTS_CS_(TALLY_HINT_(0));
		break;
	case 2:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1));
		break;
	case 3:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1) TALLY_HINT_(2));
		break;
	case 4:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1) TALLY_HINT_(2)
				TALLY_HINT_(3));
		break;
	case 5:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1) TALLY_HINT_(2)
				TALLY_HINT_(3) TALLY_HINT_(4));
		break;
	case 6:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1) TALLY_HINT_(2)
				TALLY_HINT_(3) TALLY_HINT_(4) TALLY_HINT_(5));
		break;
	case 7:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1) TALLY_HINT_(2)
				TALLY_HINT_(3) TALLY_HINT_(4) TALLY_HINT_(5)
				TALLY_HINT_(6));
		break;
	case 8:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1) TALLY_HINT_(2)
				TALLY_HINT_(3) TALLY_HINT_(4) TALLY_HINT_(5)
				TALLY_HINT_(6) TALLY_HINT_(7));
		break;
	default: {
		const long *cursor = offs;
		unsigned long left = nr;

		__asm__ __volatile__ goto(
			TALLY_RSEQ_CS_BEGIN_("%%r8")
			TALLY_HINTS_PROLOGUE_
			"testq %[left], %[left]\n\t"
			"jz 6f\n\t"
			"5:\n\t"
			"movq (%[cursor]), %%r8\n\t"
			"movq (%%rax,%%r8), %%r9\n\t"
			"addq %[hint], %%r9\n\t"
			"movq %%r9, (%%rax,%%r8)\n\t"
			"orq %%r9, %[acc]\n\t"
			"addq $8, %[cursor]\n\t"
			"decq %[left]\n\t"
			"jnz 5b\n\t"
			"6:\n\t"
			"addq %[v], (%%rax,%[vofs])\n\t"
			"2:\n\t"
			: [acc] "=&r" (acc), [c] "=&r" (c),
			  [cursor] "+r" (cursor), [left] "+r" (left)
			: TALLY_RSEQ_AREA_OPERANDS_(off, rs),
			  [base] "r" (base), [hint] "r" (hint),
			  [vofs] "r" (vofs), [v] "r" (v),
			  [shift] "i" (TALLY_PERCPU_UNIT_SHIFT)
			: "rax", "r8", "r9", "memory", "cc"
			: aborted, unregistered);
		break;
	}
	}
	*cpu = (unsigned int)c;
	return acc;
aborted:
	TALLY_RSEQ_COUNT_ABORT_();
	goto retry;
unregistered:
	return tally_percpu_add_hints_slow(base, offs, nr, hint, ptr, v, cpu);
}

static inline long tally_percpu_xchg(long *ptr, long v)
{
	ptrdiff_t off = tally_rseq_area_offset;
	unsigned char *rs = TALLY_RSEQ_AREA_(off);
	long old;

retry:
	__asm__ __volatile__ goto(
		TALLY_RSEQ_CS_BEGIN_("%%rcx")
		"shlq %[shift], %%rax\n\t"
		"addq %[base], %%rax\n\t"
		"movq (%%rax), %[old]\n\t"
		"movq %[v], (%%rax)\n\t"
		"2:\n\t"
		: [old] "=&r" (old)
		: TALLY_RSEQ_AREA_OPERANDS_(off, rs),
		  [base] "r" (ptr), [v] "r" (v),
		  [shift] "i" (TALLY_PERCPU_UNIT_SHIFT)
		: TALLY_RSEQ_DELAY_CLOBBER_ "rax", "memory", "cc"
		: aborted, unregistered);
	return old;
aborted:
	TALLY_RSEQ_COUNT_ABORT_();
	goto retry;
unregistered:
	return tally_percpu_xchg_slow(ptr, v);
}

/*
 * Keyed slots (memory groups' stocks): each CPU's copy is an array of
 * TALLY_PERCPU_SLOTS_ pairs { key, value } of 16 bytes; a key is an
 * aligned pointer (bit 0 clear), 0 for a free slot, and bit 0 set marks a
 * slot a drainer closed: no sequence matches it.  The sequences below find
 * the slot of their key on the current CPU and change its value with one
 * committing store.
 */
#define TALLY_PERCPU_SLOTS_ 8

/*
 * %rax = this CPU's first slot, %r8 = past its last; then find @key:
 * %rax = its slot, or jump to @miss.
 */
#define TALLY_SLOT_FIND_(miss)						\
	"shlq %[shift], %%rax\n\t"					\
	"addq %[base], %%rax\n\t"					\
	"leaq " TALLY_SLOTS_BYTES_ "(%%rax), %%r8\n\t"			\
	"5:\n\t"							\
	"cmpq %[key], (%%rax)\n\t"					\
	"je 6f\n\t"							\
	"addq $16, %%rax\n\t"						\
	"cmpq %%r8, %%rax\n\t"						\
	"jne 5b\n\t"							\
	"jmp %l[" miss "]\n\t"						\
	"6:\n\t"
#define TALLY_SLOTS_BYTES_ "128"

/**
 * tally_percpu_slot_take_() - internal: take @n from the value of @key's
 *	slot on the current CPU if it holds that much.
 * @slots: per-CPU pointer to the slot arrays, on the system domain.
 * @key: the key, an aligned pointer.
 * @n: the amount, > 0.
 *
 * Context: MT-safe, async-signal-safe: one restartable sequence.
 *
 * Return: 1 taken, 0 refused (no slot, or too little: nothing changed),
 * -1 this thread has no rseq area yet.
 */
static inline int tally_percpu_slot_take_(void *slots, const void *key,
					  long n)
{
	ptrdiff_t off = tally_rseq_area_offset;
	unsigned char *rs = TALLY_RSEQ_AREA_(off);

retry:
	__asm__ __volatile__ goto(
		TALLY_RSEQ_CS_BEGIN_("%%rcx")
		TALLY_SLOT_FIND_("refused")
		"movq 8(%%rax), %%rdx\n\t"
		"subq %[n], %%rdx\n\t"
		"jl %l[refused]\n\t"
		"movq %%rdx, 8(%%rax)\n\t"
		"2:\n\t"
		:
		: TALLY_RSEQ_AREA_OPERANDS_(off, rs),
		  [base] "r" (slots), [key] "r" (key), [n] "r" (n),
		  [shift] "i" (TALLY_PERCPU_UNIT_SHIFT)
		: TALLY_RSEQ_DELAY_CLOBBER_ "rax", "rdx", "r8", "memory", "cc"
		: aborted, unregistered, refused);
	return 1;
refused:
	return 0;
aborted:
	TALLY_RSEQ_COUNT_ABORT_();
	goto retry;
unregistered:
	return -1;
}

/**
 * tally_percpu_slot_give_() - internal: add @n to the value of @key's slot
 *	on the current CPU if the result stays at most @cap.
 * @slots: per-CPU pointer to the slot arrays, on the system domain.
 * @key: the key, an aligned pointer.
 * @n: the amount, > 0.
 * @cap: the largest value the slot may reach.
 *
 * Context: MT-safe, async-signal-safe: one restartable sequence.
 *
 * Return: 1 added, 0 refused (no slot, or too full: nothing changed), -1
 * this thread has no rseq area yet.
 */
static inline int tally_percpu_slot_give_(void *slots, const void *key,
					  long n, long cap)
{
	ptrdiff_t off = tally_rseq_area_offset;
	unsigned char *rs = TALLY_RSEQ_AREA_(off);

retry:
	__asm__ __volatile__ goto(
		TALLY_RSEQ_CS_BEGIN_("%%rcx")
		TALLY_SLOT_FIND_("refused")
		"movq 8(%%rax), %%rdx\n\t"
		"addq %[n], %%rdx\n\t"
		"cmpq %[cap], %%rdx\n\t"
		"jg %l[refused]\n\t"
		"movq %%rdx, 8(%%rax)\n\t"
		"2:\n\t"
		:
		: TALLY_RSEQ_AREA_OPERANDS_(off, rs),
		  [base] "r" (slots), [key] "r" (key), [n] "r" (n),
		  [cap] "r" (cap), [shift] "i" (TALLY_PERCPU_UNIT_SHIFT)
		: TALLY_RSEQ_DELAY_CLOBBER_ "rax", "rdx", "r8", "memory", "cc"
		: aborted, unregistered, refused);
	return 1;
refused:
	return 0;
aborted:
	TALLY_RSEQ_COUNT_ABORT_();
	goto retry;
unregistered:
	return -1;
}

/**
 * tally_percpu_slot_evict_() - internal: empty slot @idx of the current
 *	CPU if its key is still @old, storing the value it held in *@out.
 * @slots: per-CPU pointer to the slot arrays, on the system domain.
 * @idx: the slot, below %TALLY_PERCPU_SLOTS_.
 * @old: the key expected there.
 * @out: receives the value taken (written before the commit: read it
 *	only on success).
 *
 * Context: MT-safe, async-signal-safe: one restartable sequence.
 *
 * Return: 1 emptied, 0 the key changed, -1 no rseq area yet.
 */
static inline int tally_percpu_slot_evict_(void *slots, unsigned int idx,
					   const void *old, long *out)
{
	ptrdiff_t off = tally_rseq_area_offset;
	unsigned char *rs = TALLY_RSEQ_AREA_(off);
	long sofs = (long)idx * 16;

retry:
	__asm__ __volatile__ goto(
		TALLY_RSEQ_CS_BEGIN_("%%rcx")
		"shlq %[shift], %%rax\n\t"
		"addq %[base], %%rax\n\t"
		"addq %[sofs], %%rax\n\t"
		"cmpq %[old], (%%rax)\n\t"
		"jne %l[refused]\n\t"
		"movq 8(%%rax), %%rdx\n\t"
		"movq %%rdx, (%[out])\n\t"
		"movq $0, 8(%%rax)\n\t"
		"2:\n\t"
		:
		: TALLY_RSEQ_AREA_OPERANDS_(off, rs),
		  [base] "r" (slots), [sofs] "r" (sofs), [old] "r" (old),
		  [out] "r" (out), [shift] "i" (TALLY_PERCPU_UNIT_SHIFT)
		: TALLY_RSEQ_DELAY_CLOBBER_ "rax", "rdx", "memory", "cc"
		: aborted, unregistered, refused);
	return 1;
refused:
	return 0;
aborted:
	TALLY_RSEQ_COUNT_ABORT_();
	goto retry;
unregistered:
	return -1;
}

/**
 * tally_percpu_slot_install_() - internal: make slot @idx of the current
 *	CPU @key's, if it still holds @old with a value of 0, no slot of
 *	this CPU has @key already, and *@stop is 0.
 * @slots: per-CPU pointer to the slot arrays, on the system domain.
 * @idx: the slot, below %TALLY_PERCPU_SLOTS_.
 * @old: the key expected there (0: a free slot).
 * @key: the new key, an aligned pointer.
 * @stop: read inside the sequence: whoever sets it, then issues
 *	membarrier(PRIVATE_EXPEDITED_RSEQ), knows no install is in flight.
 *
 * Context: MT-safe, async-signal-safe: one restartable sequence.
 *
 * Return: 1 installed, 0 refused (@key has a slot, or slot @idx changed),
 * -1 no rseq area yet.
 */
static inline int tally_percpu_slot_install_(void *slots, unsigned int idx,
					     const void *old, const void *key,
					     const int *stop)
{
	ptrdiff_t off = tally_rseq_area_offset;
	unsigned char *rs = TALLY_RSEQ_AREA_(off);
	long sofs = (long)idx * 16;

retry:
	__asm__ __volatile__ goto(
		TALLY_RSEQ_CS_BEGIN_("%%rcx")
		"cmpl $0, (%[stop])\n\t"
		"jne %l[refused]\n\t"
		"shlq %[shift], %%rax\n\t"
		"addq %[base], %%rax\n\t"
		"leaq " TALLY_SLOTS_BYTES_ "(%%rax), %%r8\n\t"
		"movq %%rax, %%rdx\n\t"
		"5:\n\t"
		"cmpq %[key], (%%rdx)\n\t"
		"je %l[refused]\n\t"
		"addq $16, %%rdx\n\t"
		"cmpq %%r8, %%rdx\n\t"
		"jne 5b\n\t"
		"addq %[sofs], %%rax\n\t"
		"cmpq %[old], (%%rax)\n\t"
		"jne %l[refused]\n\t"
		"cmpq $0, 8(%%rax)\n\t"
		"jne %l[refused]\n\t"
		"movq %[key], (%%rax)\n\t"
		"2:\n\t"
		:
		: TALLY_RSEQ_AREA_OPERANDS_(off, rs),
		  [base] "r" (slots), [sofs] "r" (sofs), [old] "r" (old),
		  [key] "r" (key), [stop] "r" (stop),
		  [shift] "i" (TALLY_PERCPU_UNIT_SHIFT)
		: TALLY_RSEQ_DELAY_CLOBBER_ "rax", "rdx", "r8", "memory", "cc"
		: aborted, unregistered, refused);
	return 1;
refused:
	return 0;
aborted:
	TALLY_RSEQ_COUNT_ABORT_();
	goto retry;
unregistered:
	return -1;
}

#endif /* TALLY_PERCPU_X86_64_H */
