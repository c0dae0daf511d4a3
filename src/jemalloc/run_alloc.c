// SPDX-License-Identifier: MIT
/*
 * run_alloc.c - the allocation functions of a program under `tally run`:
 * jemalloc's, retried after tally_jemalloc_make_room() when the group's
 * limit refused them.
 *
 * The extent hooks refuse a charge that the stocks cannot serve without
 * calling into jemalloc or user code (tally/jemalloc.h, Limits), so the
 * purge of dirty pages, the reclaim and the OOM policy run here, after
 * jemalloc's function returned and holds no lock.  libtally_run.so is
 * preloaded before jemalloc, so these definitions are the process's;
 * each calls jemalloc's own (found in the object that defines mallocx(),
 * which only jemalloc has), and, when it fails and the hooks noted a
 * refused charge, makes room and calls it again, a few times at most: a
 * large allocation may commit in more than one step.  operator new is
 * wrapped the same way, through jemalloc's mallocx(), which calls no new
 * handler: room is made before the program's new handler runs; once no
 * room can be made, jemalloc's own operator new (libstdc++'s where
 * jemalloc has none) runs the handler and throws std::bad_alloc (or
 * returns NULL, for the nothrow variants) as it does without tally.
 *
 * A thread's first call here, whoever started the thread (the program,
 * or glibc for a timer's notification or asynchronous I/O), first makes
 * jemalloc set the thread up (a read of a control) with its charges
 * %TALLY_MEMCG_NOFAIL: jemalloc 5.3 allocates the thread's cache at its
 * first call and, when that allocation fails (a limit reached), leaves
 * the thread with a cache it crashes on.  The group may go over its max
 * by one thread cache per thread that starts at the limit, counted as
 * usage, rather than crash.  free() is wrapped for that alone: a thread's
 * first call may be the free() of another thread's block.
 *
 * Until jemalloc's functions are found (the loader may allocate while
 * this library looks them up), the functions serve themselves from
 * jemalloc's non-standard interface (mallocx() and the like).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include <tally/jemalloc.h>

#include "jemalloc_internal.h"

#define EXPORT __attribute__((visibility("default")))

/* The most times one allocation is retried after room was made. */
#define RETRIES 4

/* Stand-ins for std::nothrow_t and std::align_val_t of the C++ ABI. */
typedef struct { char unused; } nothrow_t;
typedef size_t align_val_t;

static struct {
	void (*free)(void *);
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*new_)(size_t);
	void *(*new_nothrow)(size_t, const nothrow_t *);
	void *(*new_array)(size_t);
	void *(*new_array_nothrow)(size_t, const nothrow_t *);
	void *(*new_aligned)(size_t, align_val_t);
	void *(*new_aligned_nothrow)(size_t, align_val_t, const nothrow_t *);
	void *(*new_array_aligned)(size_t, align_val_t);
	void *(*new_array_aligned_nothrow)(size_t, align_val_t,
					   const nothrow_t *);
} je;

static atomic_bool je_found;
static __thread bool finding;
/* Preloaded at the program's start: its thread-local storage is static. */
static __thread bool thread_ready __attribute__((tls_model("initial-exec")));

static const nothrow_t nothrow;

static void find(void **slot, void *h, const char *name)
{
	*slot = dlsym(h, name);
}

/* operator new: jemalloc's, or the next definition (libstdc++'s, which
 * calls malloc()) when jemalloc was built without C++ support. */
static void find_new(void **slot, void *h, const char *name)
{
	*slot = dlsym(h, name);
	if (!*slot)
		*slot = dlsym(RTLD_NEXT, name);
}

/* Look jemalloc's functions up in the object that defines mallocx(). */
static bool find_jemalloc(void)
{
	Dl_info info;
	void *h;

	if (!dladdr((void *)mallocx, &info) ||
	    !(h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD)))
		return false;
	find((void **)&je.free, h, "free");
	find((void **)&je.malloc, h, "malloc");
	find((void **)&je.calloc, h, "calloc");
	find((void **)&je.realloc, h, "realloc");
	find((void **)&je.posix_memalign, h, "posix_memalign");
	find((void **)&je.aligned_alloc, h, "aligned_alloc");
	find((void **)&je.memalign, h, "memalign");
	find_new((void **)&je.new_, h, "_Znwm");
	find_new((void **)&je.new_nothrow, h, "_ZnwmRKSt9nothrow_t");
	find_new((void **)&je.new_array, h, "_Znam");
	find_new((void **)&je.new_array_nothrow, h, "_ZnamRKSt9nothrow_t");
	find_new((void **)&je.new_aligned, h, "_ZnwmSt11align_val_t");
	find_new((void **)&je.new_aligned_nothrow, h,
		 "_ZnwmSt11align_val_tRKSt9nothrow_t");
	find_new((void **)&je.new_array_aligned, h, "_ZnamSt11align_val_t");
	find_new((void **)&je.new_array_aligned_nothrow, h,
		 "_ZnamSt11align_val_tRKSt9nothrow_t");
	dlclose(h);
	return je.free && je.malloc && je.calloc && je.realloc &&
	       je.posix_memalign && je.aligned_alloc && je.memalign &&
	       je.new_ && je.new_nothrow && je.new_array &&
	       je.new_array_nothrow && je.new_aligned &&
	       je.new_aligned_nothrow && je.new_array_aligned &&
	       je.new_array_aligned_nothrow;
}

/*
 * Whether the calling thread may call jemalloc's functions: they are
 * known (the first call of the process looks them up; false for a call
 * the loader makes meanwhile), and the thread's first call set it up in
 * jemalloc with its charges %TALLY_MEMCG_NOFAIL (see the top).
 */
static bool je_ready(void)
{
	bool enabled;
	size_t len = sizeof(enabled);

	if (__builtin_expect(thread_ready, 1))
		return true;
	if (finding)
		return false;
	finding = true;
	if (!atomic_load_explicit(&je_found, memory_order_acquire)) {
		if (!find_jemalloc()) {
			finding = false;
			return false;
		}
		atomic_store_explicit(&je_found, true, memory_order_release);
	}
	tally_je_thread_starting(true);
	mallctl("thread.tcache.enabled", &enabled, &len, NULL, 0);
	tally_je_thread_starting(false);
	finding = false;
	thread_ready = true;
	return true;
}

/* Whether to try again: room was made for a refused charge. */
static bool room_made(int *tries)
{
	int err = errno;
	bool again = (*tries)++ < RETRIES && tally_jemalloc_make_room() == 0;

	errno = err;
	return again;
}

/* jemalloc's interface, while its standard functions are not known. */
static void *early_alloc(size_t n, size_t align, bool zero)
{
	int flags = (align ? MALLOCX_ALIGN(align) : 0) |
		    (zero ? MALLOCX_ZERO : 0);
	void *p = mallocx(n ? n : 1, flags);

	if (!p)
		errno = ENOMEM;
	return p;
}

EXPORT void free(void *p)
{
	if (!je_ready()) {
		if (p)
			dallocx(p, 0);
		return;
	}
	je.free(p);
}

EXPORT void *malloc(size_t n)
{
	void *p;
	int tries = 0;

	if (!je_ready())
		return early_alloc(n, 0, false);
	p = je.malloc(n);
	while (!p && room_made(&tries))
		p = je.malloc(n);
	return p;
}

EXPORT void *calloc(size_t nmemb, size_t size)
{
	void *p;
	int tries = 0;

	if (!je_ready()) {
		if (size && nmemb > SIZE_MAX / size) {
			errno = ENOMEM;
			return NULL;
		}
		return early_alloc(nmemb * size, 0, true);
	}
	p = je.calloc(nmemb, size);
	while (!p && room_made(&tries))
		p = je.calloc(nmemb, size);
	return p;
}

EXPORT void *realloc(void *old, size_t n)
{
	void *p;
	int tries = 0;

	if (!je_ready()) {
		if (!old)
			return early_alloc(n, 0, false);
		if (!n) {
			dallocx(old, 0);
			return NULL;
		}
		p = rallocx(old, n, 0);
		if (!p)
			errno = ENOMEM;
		return p;
	}
	p = je.realloc(old, n);
	/* realloc(p, 0) frees and returns NULL: nothing to retry. */
	while (!p && (n || !old) && room_made(&tries))
		p = je.realloc(old, n);
	return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	int ret, tries = 0;

	if (!je_ready()) {
		if (!align || (align & (align - 1)) ||
		    align % sizeof(void *))
			return EINVAL;
		*out = early_alloc(n, align, false);
		return *out ? 0 : ENOMEM;
	}
	ret = je.posix_memalign(out, align, n);
	while (ret == ENOMEM && room_made(&tries))
		ret = je.posix_memalign(out, align, n);
	return ret;
}

/* aligned_alloc(), memalign(): jemalloc's checks of @align, retried. */
static void *aligned(void *(**fn)(size_t, size_t), size_t align, size_t n)
{
	void *p;
	int tries = 0;

	if (!je_ready()) {
		if (!align || (align & (align - 1))) {
			errno = EINVAL;
			return NULL;
		}
		return early_alloc(n, align, false);
	}
	p = (*fn)(align, n);
	while (!p && errno == ENOMEM && room_made(&tries))
		p = (*fn)(align, n);
	return p;
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
	return aligned(&je.aligned_alloc, align, n);
}

EXPORT void *memalign(size_t align, size_t n)
{
	return aligned(&je.memalign, align, n);
}

EXPORT void *valloc(size_t n)
{
	return aligned(&je.memalign, (size_t)sysconf(_SC_PAGESIZE), n);
}

/*
 * jemalloc has no pvalloc(): glibc's would serve it from glibc's own heap,
 * uncharged, and jemalloc's free() cannot take that block back (the
 * program crashes).  Whole pages, one for 0 bytes, as glibc's.
 */
EXPORT void *pvalloc(size_t n);

EXPORT void *pvalloc(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (n > SIZE_MAX - page) {
		errno = ENOMEM;
		return NULL;
	}
	return valloc(n ? (n + page - 1) & ~(page - 1) : page);
}

/*
 * operator new: mallocx() (no new handler), retried after room was made;
 * then, if it is still refused, jemalloc's operator new @fallback, which
 * runs the program's new handler and throws std::bad_alloc or returns
 * NULL.  Before jemalloc's are known, the loader's own calls get
 * mallocx(), as malloc()'s.
 */
static void *new_retried(void *(*fallback)(size_t), size_t n)
{
	void *p;
	int tries = 0;

	if (!je_ready())
		return early_alloc(n, 0, false);
	p = mallocx(n ? n : 1, 0);
	while (!p && room_made(&tries))
		p = mallocx(n ? n : 1, 0);
	return p ? p : fallback(n);
}

static void *new_aligned_retried(void *(*fallback)(size_t, align_val_t),
				 size_t n, align_val_t align)
{
	void *p;
	int tries = 0;

	if (!je_ready())
		return early_alloc(n, align, false);
	p = mallocx(n ? n : 1, MALLOCX_ALIGN(align));
	while (!p && room_made(&tries))
		p = mallocx(n ? n : 1, MALLOCX_ALIGN(align));
	return p ? p : fallback(n, align);
}

/* The nothrow variants' fallbacks, with std::nothrow. */
static void *nothrow_new(size_t n)
{
	return je.new_nothrow(n, &nothrow);
}

static void *nothrow_new_array(size_t n)
{
	return je.new_array_nothrow(n, &nothrow);
}

static void *nothrow_new_aligned(size_t n, align_val_t a)
{
	return je.new_aligned_nothrow(n, a, &nothrow);
}

static void *nothrow_new_array_aligned(size_t n, align_val_t a)
{
	return je.new_array_aligned_nothrow(n, a, &nothrow);
}

EXPORT void *run_new(size_t n) __asm__("_Znwm");
EXPORT void *run_new_nothrow(size_t n, const nothrow_t *t)
	__asm__("_ZnwmRKSt9nothrow_t");
EXPORT void *run_new_array(size_t n) __asm__("_Znam");
EXPORT void *run_new_array_nothrow(size_t n, const nothrow_t *t)
	__asm__("_ZnamRKSt9nothrow_t");
EXPORT void *run_new_aligned(size_t n, align_val_t a)
	__asm__("_ZnwmSt11align_val_t");
EXPORT void *run_new_aligned_nothrow(size_t n, align_val_t a,
				     const nothrow_t *t)
	__asm__("_ZnwmSt11align_val_tRKSt9nothrow_t");
EXPORT void *run_new_array_aligned(size_t n, align_val_t a)
	__asm__("_ZnamSt11align_val_t");
EXPORT void *run_new_array_aligned_nothrow(size_t n, align_val_t a,
					   const nothrow_t *t)
	__asm__("_ZnamSt11align_val_tRKSt9nothrow_t");

void *run_new(size_t n)
{
	return new_retried(je.new_, n);
}

void *run_new_nothrow(size_t n, const nothrow_t *t)
{
	(void)t;
	return new_retried(nothrow_new, n);
}

void *run_new_array(size_t n)
{
	return new_retried(je.new_array, n);
}

void *run_new_array_nothrow(size_t n, const nothrow_t *t)
{
	(void)t;
	return new_retried(nothrow_new_array, n);
}

void *run_new_aligned(size_t n, align_val_t a)
{
	return new_aligned_retried(je.new_aligned, n, a);
}

void *run_new_aligned_nothrow(size_t n, align_val_t a, const nothrow_t *t)
{
	(void)t;
	return new_aligned_retried(nothrow_new_aligned, n, a);
}

void *run_new_array_aligned(size_t n, align_val_t a)
{
	return new_aligned_retried(je.new_array_aligned, n, a);
}

void *run_new_array_aligned_nothrow(size_t n, align_val_t a,
				    const nothrow_t *t)
{
	(void)t;
	return new_aligned_retried(nothrow_new_array_aligned, n, a);
}
