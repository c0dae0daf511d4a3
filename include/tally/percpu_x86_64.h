/* SPDX-License-Identifier: MIT */
#ifndef TALLY_PERCPU_X86_64_H
#define TALLY_PERCPU_X86_64_H

/*
 * tally/percpu_x86_64.h - the restartable sequences of tally/percpu.h for
 * x86-64.  Included by tally/percpu.h, which documents each function;
 * never include it directly.  Every name ending in '_' is internal.
 *
 * Every sequence is one TALLY_RSEQ_() statement: the template below
 * writes the parts all sequences share (the descriptor, the abort
 * handler, arming rseq_cs, the cpu_id read, the end label, the retry and
 * the fault-injection points) and an operation supplies only its body
 * and its commit.  A new operation is a new body, not a new copy of the
 * asm; the statistics tree's sequences (src/stats/stats_update.c) use the same
 * template.
 *
 * Why not librseq (the rseq library of the kernel's rseq maintainer, with
 * one template per architecture): it is not packaged in Debian 12, the
 * release tally targets, so users would have to build it from source;
 * its public API is a fixed set of operations (compare-and-store, add,
 * memcpy, ...) while its asm template is declared internal to its
 * headers, and tally's sequences (a list of hints ORed together, a keyed
 * slot search, the statistics tree's hint cache) are not in that set;
 * its headers have moved between versions (rseq/rseq-x86.h became
 * rseq/arch/x86.h); and the public inline operations of this header
 * would make every user compile against, and link, librseq.  The
 * template here is small and follows the same ABI (the signature and
 * descriptor are librseq's).
 */

#ifndef TALLY_PERCPU_H
#error "include <tally/percpu.h>, not <tally/percpu_x86_64.h>"
#endif

#define TALLY_RSEQ_SIG 0x53053053

/* Offsets inside struct rseq (linux/rseq.h). */
#define TALLY_RSEQ_CPU_ID_OFFSET 4
#define TALLY_RSEQ_CS_OFFSET 8

#define TALLY_RSEQ_STR_(x) #x
#define TALLY_RSEQ_XSTR_(x) TALLY_RSEQ_STR_(x)
/* The items of a parenthesized list, (a, b) -> a, b. */
#define TALLY_RSEQ_LIST_(...) __VA_ARGS__
/* The first item of a parenthesized list, as a string. */
#define TALLY_RSEQ_FIRST_(...) TALLY_RSEQ_FIRST2_(__VA_ARGS__, )
#define TALLY_RSEQ_FIRST2_(first, ...) #first

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

#ifdef TALLY_INJECT
/*
 * Test builds: a delay of tally_inject_rseq_delay iterations at each
 * injection point of every sequence (after cpu_id is read, and between
 * the body and the commit), in %rcx, which only the template uses, so
 * that signals and preemption land there; each abort is counted in
 * tally_inject_rseq_aborts.  Hidden: the asm reaches the delay
 * RIP-relative, without a register for its address.
 */
extern long tally_inject_rseq_delay __attribute__((visibility("hidden")));
extern unsigned long tally_inject_rseq_aborts
	__attribute__((visibility("hidden")));
#define TALLY_RSEQ_INJECT_						\
	"movq %[rseq_delay], %%rcx\n\t"					\
	"7:\n\t"							\
	"testq %%rcx, %%rcx\n\t"					\
	"jz 8f\n\t"							\
	"decq %%rcx\n\t"						\
	"jmp 7b\n\t"							\
	"8:\n\t"
#define TALLY_RSEQ_INJECT_OPERAND_					\
	, [rseq_delay] "m" (tally_inject_rseq_delay)
#define TALLY_RSEQ_INJECT_CLOBBER_ , "rcx"
#define TALLY_RSEQ_COUNT_ABORT_()					\
	__atomic_add_fetch(&tally_inject_rseq_aborts, 1, __ATOMIC_RELAXED)
#else
#define TALLY_RSEQ_INJECT_
#define TALLY_RSEQ_INJECT_OPERAND_
#define TALLY_RSEQ_INJECT_CLOBBER_
#define TALLY_RSEQ_COUNT_ABORT_() ((void)0)
#endif

/*
 * The head of every sequence, in its steps.  Label 1 starts the
 * sequence, 2 ends it (after the commit), 3 is the descriptor, 4 the abort
 * entry; 7 and 8 are the injection delay's.  Bodies use other numbers.
 *
 *   - the descriptor {version 0, flags 0, start_ip, post_commit_offset,
 *     abort_ip} in section __rseq_cs;
 *   - the abort handler in __rseq_failure, after the 4-byte signature
 *     (as the operand of a ud1, so that disassemblers stay in step): it
 *     jumps to the template's C label, which counts the abort and runs
 *     the statement again;
 *   - a zero area offset (tally not set up yet) goes to @unreg;
 *   - the descriptor's address stored into rseq->rseq_cs arms it (the
 *     area is addressed from %fs, the thread pointer's segment, with its
 *     offset in a register: no register for the area's address; the
 *     "memory" clobber orders the accesses);
 *   - from label 1: cpu_id into %eax (so %rax: the CPU number); negative,
 *     the thread has no registration: to @unreg;
 *   - an injection point.
 */
#define TALLY_RSEQ_BEGIN_(unreg)					\
	".pushsection __rseq_cs, \"aw\"\n\t"				\
	".balign 32\n\t"						\
	"3:\n\t"							\
	".long 0x0, 0x0\n\t"						\
	".quad 1f, (2f - 1f), 4f\n\t"					\
	".popsection\n\t"						\
	".pushsection __rseq_failure, \"ax\"\n\t"			\
	".byte 0x0f, 0xb9, 0x3d\n\t"					\
	".long " TALLY_RSEQ_XSTR_(TALLY_RSEQ_SIG) "\n\t"		\
	"4:\n\t"							\
	"jmp %l[tally_rseq_aborted_]\n\t"				\
	".popsection\n\t"						\
	"testq %[rseq_off], %[rseq_off]\n\t"				\
	"jz %l[" unreg "]\n\t"						\
	"leaq 3b(%%rip), %%rax\n\t"					\
	"movq %%rax, %%fs:" TALLY_RSEQ_XSTR_(TALLY_RSEQ_CS_OFFSET)	\
		"(%[rseq_off])\n\t"					\
	"1:\n\t"							\
	"movl %%fs:" TALLY_RSEQ_XSTR_(TALLY_RSEQ_CPU_ID_OFFSET)	\
		"(%[rseq_off]), %%eax\n\t"				\
	"testl %%eax, %%eax\n\t"					\
	"js %l[" unreg "]\n\t"						\
	TALLY_RSEQ_INJECT_

/* Body steps: %rax = the CPU's distance from CPU 0's copies, ... */
#define TALLY_RSEQ_CPU_UNIT_						\
	"shlq %[shift], %%rax\n\t"
/* ... or %rax = the CPU's copy of the per-CPU pointer in operand @base. */
#define TALLY_RSEQ_CPU_COPY_(base)					\
	TALLY_RSEQ_CPU_UNIT_						\
	"addq %[" base "], %%rax\n\t"

/*
 * TALLY_RSEQ_() - one restartable sequence, as one asm goto statement.
 * @body: asm string run after the head (%rax: the CPU number); it may
 *	leave without committing by jumping to one of @labels (%l[name]).
 * @commit: the one instruction that commits (the sequence's only store
 *	that must not be redone; stores before it are redone on a restart).
 * @outputs: parenthesized list of output operands, possibly empty.
 * @inputs: parenthesized list of input operands, not empty; [shift] (the
 *	per-CPU unit's shift) and [rseq_off] (the area's offset) are added.
 * @clobbers: parenthesized list of the registers the body and commit
 *	use, not empty ("rax" unless an output is bound to it); "memory" and
 *	"cc" are added.  Never "rcx": the injection points use it.
 * @labels: parenthesized list of C labels: first the one taken when the
 *	thread has no rseq area, then those the body jumps to.
 *
 * An abort (preemption, migration, signal before the commit) is counted
 * in test builds and runs the statement again from the head; the
 * statement completes when the commit is done, or by a jump to @labels.
 * Outputs are valid only after completion by the commit.
 */
#define TALLY_RSEQ_(body, commit, outputs, inputs, clobbers, labels)	\
	__extension__ ({						\
		__label__ tally_rseq_aborted_;				\
		/* Assigned, not initialised: C++ forbids an asm goto	\
		 * of another sequence of the function to jump past an	\
		 * initialisation (clang++ counts every label). */	\
		ptrdiff_t tally_rseq_off_;				\
									\
		tally_rseq_off_ = tally_rseq_area_offset;		\
									\
		if (0) {						\
		tally_rseq_aborted_:					\
			TALLY_RSEQ_COUNT_ABORT_();			\
		}							\
		__asm__ __volatile__ goto(				\
			TALLY_RSEQ_BEGIN_(TALLY_RSEQ_FIRST_ labels)	\
			body						\
			TALLY_RSEQ_INJECT_				\
			commit "\n\t"					\
			"2:\n\t"					\
			: TALLY_RSEQ_LIST_ outputs			\
			: [rseq_off] "r" (tally_rseq_off_)		\
			  TALLY_RSEQ_INJECT_OPERAND_,			\
			  [shift] "i" (TALLY_PERCPU_UNIT_SHIFT),	\
			  TALLY_RSEQ_LIST_ inputs			\
			: TALLY_RSEQ_LIST_ clobbers, "memory", "cc"	\
			  TALLY_RSEQ_INJECT_CLOBBER_			\
			: tally_rseq_aborted_, TALLY_RSEQ_LIST_ labels); \
	})

static inline long tally_percpu_add_return(long *ptr, long v,
					   unsigned int *cpu)
{
	long res;
	unsigned long c;

	TALLY_RSEQ_("movl %%eax, %k[c]\n\t"
		    TALLY_RSEQ_CPU_COPY_("base")
		    "movq (%%rax), %[res]\n\t"
		    "addq %[v], %[res]\n\t",
		    "movq %[res], (%%rax)",
		    ([res] "=&r" (res), [c] "=&r" (c)),
		    ([base] "r" (ptr), [v] "r" (v)),
		    ("rax"),
		    (unregistered));
	*cpu = (unsigned int)c;
	return res;
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
	unsigned int cpu;

	TALLY_RSEQ_(TALLY_RSEQ_CPU_COPY_("base"),
		    "addq %[v], (%%rax)",
		    (),
		    ([base] "r" (ptr), [v] "r" (v)),
		    ("rax"),
		    (unregistered));
	return;
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

/*
 * A hint sequence: remember the CPU, %rax = this CPU's copy of base,
 * clear the OR, run @hints, commit @v at @vofs; @more_out and @more_in:
 * parenthesized lists of the operands @hints needs besides, each with a
 * leading comma, or empty.
 */
#define TALLY_HINTS_CS_(hints, more_out, more_in)			\
	TALLY_RSEQ_("movl %%eax, %k[c]\n\t"				\
		    TALLY_RSEQ_CPU_COPY_("base")			\
		    "xorl %k[acc], %k[acc]\n\t"				\
		    hints,						\
		    "addq %[v], (%%rax,%[vofs])",			\
		    ([acc] "=&r" (acc), [c] "=&r" (c)			\
		     TALLY_RSEQ_LIST_ more_out),			\
		    ([base] "r" (base), [offs] "r" (offs),		\
		     [hint] "r" (hint), [vofs] "r" (vofs),		\
		     [v] "r" (v) TALLY_RSEQ_LIST_ more_in),		\
		    ("rax", "r8", "r9"),				\
		    (unregistered))

static inline unsigned long tally_percpu_add_hints(long *base,
						   const long *offs,
						   unsigned long nr, long hint,
						   long *ptr, long v,
						   unsigned int *cpu)
{
	long vofs = (char *)ptr - (char *)base;
	unsigned long acc, c, left;

	switch (nr) {
	case 1:
		TALLY_HINTS_CS_(TALLY_HINT_(0), (), ());
		break;
	case 2:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1), (), ());
		break;
	case 3:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1) TALLY_HINT_(2), (), ());
		break;
	case 4:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1) TALLY_HINT_(2)
				TALLY_HINT_(3), (), ());
		break;
	case 5:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1) TALLY_HINT_(2)
				TALLY_HINT_(3) TALLY_HINT_(4), (), ());
		break;
	case 6:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1) TALLY_HINT_(2)
				TALLY_HINT_(3) TALLY_HINT_(4) TALLY_HINT_(5), (), ());
		break;
	case 7:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1) TALLY_HINT_(2)
				TALLY_HINT_(3) TALLY_HINT_(4) TALLY_HINT_(5)
				TALLY_HINT_(6), (), ());
		break;
	case 8:
		TALLY_HINTS_CS_(TALLY_HINT_(0) TALLY_HINT_(1) TALLY_HINT_(2)
				TALLY_HINT_(3) TALLY_HINT_(4) TALLY_HINT_(5)
				TALLY_HINT_(6) TALLY_HINT_(7), (), ());
		break;
	default:
		/*
		 * A loop, last hint first: its counter starts from @nr in
		 * the sequence, so that a restart starts it again.
		 */
		TALLY_HINTS_CS_("movq %[nr], %[left]\n\t"
				"testq %[left], %[left]\n\t"
				"jz 6f\n\t"
				"5:\n\t"
				"movq -8(%[offs],%[left],8), %%r8\n\t"
				"movq (%%rax,%%r8), %%r9\n\t"
				"addq %[hint], %%r9\n\t"
				"movq %%r9, (%%rax,%%r8)\n\t"
				"orq %%r9, %[acc]\n\t"
				"decq %[left]\n\t"
				"jnz 5b\n\t"
				"6:\n\t",
				(, [left] "=&r" (left)), (, [nr] "rm" (nr)));
		break;
	}
	*cpu = (unsigned int)c;
	return acc;
unregistered:
	return tally_percpu_add_hints_slow(base, offs, nr, hint, ptr, v, cpu);
}

static inline long tally_percpu_xchg(long *ptr, long v)
{
	long old;

	TALLY_RSEQ_(TALLY_RSEQ_CPU_COPY_("base")
		    "movq (%%rax), %[old]\n\t",
		    "movq %[v], (%%rax)",
		    ([old] "=&r" (old)),
		    ([base] "r" (ptr), [v] "r" (v)),
		    ("rax"),
		    (unregistered));
	return old;
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
#define TALLY_SLOTS_BYTES_ "128"

/*
 * %rax = this CPU's first slot, %r8 = past its last; then find @key:
 * %rax = its slot, or jump to @miss.
 */
#define TALLY_SLOT_FIND_(miss)						\
	TALLY_RSEQ_CPU_COPY_("base")					\
	"leaq " TALLY_SLOTS_BYTES_ "(%%rax), %%r8\n\t"			\
	"5:\n\t"							\
	"cmpq %[key], (%%rax)\n\t"					\
	"je 6f\n\t"							\
	"addq $16, %%rax\n\t"						\
	"cmpq %%r8, %%rax\n\t"						\
	"jne 5b\n\t"							\
	"jmp %l[" miss "]\n\t"						\
	"6:\n\t"

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
	TALLY_RSEQ_(TALLY_SLOT_FIND_("refused")
		    "movq 8(%%rax), %%rdx\n\t"
		    "subq %[n], %%rdx\n\t"
		    "jl %l[refused]\n\t",
		    "movq %%rdx, 8(%%rax)",
		    (),
		    ([base] "r" (slots), [key] "r" (key), [n] "r" (n)),
		    ("rax", "rdx", "r8"),
		    (unregistered, refused));
	return 1;
refused:
	return 0;
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
	TALLY_RSEQ_(TALLY_SLOT_FIND_("refused")
		    "movq 8(%%rax), %%rdx\n\t"
		    "addq %[n], %%rdx\n\t"
		    "cmpq %[cap], %%rdx\n\t"
		    "jg %l[refused]\n\t",
		    "movq %%rdx, 8(%%rax)",
		    (),
		    ([base] "r" (slots), [key] "r" (key), [n] "r" (n),
		     [cap] "r" (cap)),
		    ("rax", "rdx", "r8"),
		    (unregistered, refused));
	return 1;
refused:
	return 0;
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
	long sofs = (long)idx * 16;

	TALLY_RSEQ_(TALLY_RSEQ_CPU_COPY_("base")
		    "addq %[sofs], %%rax\n\t"
		    "cmpq %[old], (%%rax)\n\t"
		    "jne %l[refused]\n\t"
		    "movq 8(%%rax), %%rdx\n\t"
		    "movq %%rdx, (%[out])\n\t",
		    "movq $0, 8(%%rax)",
		    (),
		    ([base] "r" (slots), [sofs] "r" (sofs), [old] "r" (old),
		     [out] "r" (out)),
		    ("rax", "rdx"),
		    (unregistered, refused));
	return 1;
refused:
	return 0;
unregistered:
	return -1;
}

/**
 * tally_percpu_slot_release_() - internal: free slot @idx of the current
 *	CPU if its key is still @old and its value 0.
 * @slots: per-CPU pointer to the slot arrays, on the system domain.
 * @idx: the slot, below %TALLY_PERCPU_SLOTS_.
 * @old: the key expected there.
 *
 * Context: MT-safe, async-signal-safe: one restartable sequence.
 *
 * Return: 1 freed, 0 refused (the key changed, or the slot holds a value
 * again), -1 no rseq area yet.
 */
static inline int tally_percpu_slot_release_(void *slots, unsigned int idx,
					     const void *old)
{
	long sofs = (long)idx * 16;

	TALLY_RSEQ_(TALLY_RSEQ_CPU_COPY_("base")
		    "addq %[sofs], %%rax\n\t"
		    "cmpq %[old], (%%rax)\n\t"
		    "jne %l[refused]\n\t"
		    "cmpq $0, 8(%%rax)\n\t"
		    "jne %l[refused]\n\t",
		    "movq $0, (%%rax)",
		    (),
		    ([base] "r" (slots), [sofs] "r" (sofs), [old] "r" (old)),
		    ("rax"),
		    (unregistered, refused));
	return 1;
refused:
	return 0;
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
	long sofs = (long)idx * 16;

	TALLY_RSEQ_("cmpl $0, (%[stop])\n\t"
		    "jne %l[refused]\n\t"
		    TALLY_RSEQ_CPU_COPY_("base")
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
		    "jne %l[refused]\n\t",
		    "movq %[key], (%%rax)",
		    (),
		    ([base] "r" (slots), [sofs] "r" (sofs), [old] "r" (old),
		     [key] "r" (key), [stop] "r" (stop)),
		    ("rax", "rdx", "r8"),
		    (unregistered, refused));
	return 1;
refused:
	return 0;
unregistered:
	return -1;
}

#endif /* TALLY_PERCPU_X86_64_H */
