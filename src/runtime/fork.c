// SPDX-License-Identifier: MIT
/*
 * fork.c - the library's one pthread_atfork(), and the order of every
 * layer's fork handlers.
 *
 * Owns: the table of handlers, one set per rank (enum tally_fork_rank in
 * fork.h, which gives the lock order and why), and the one handler the
 * process runs around fork().  fork() copies only the calling thread, so
 * every lock of the library must be held by that thread across it (no
 * other thread may be inside a critical section the child inherits), and
 * the child rebuilds each lock and repairs what the vanished threads left
 * half done.
 *
 * Invariant: prepare takes the locks of rank 0 first and of the last rank
 * last, the order every path takes them in, so preparing cannot deadlock
 * with a thread that holds one lock and waits for another; parent and
 * child run the ranks from the last to the first.  Each fork runs the
 * parent or child handlers of exactly the ranks whose prepare ran, even
 * if a rank registers meanwhile (a dlopen() in another thread).
 *
 * Install: once (pthread_once), at the first registration, which every
 * layer makes from a constructor, before any of its locks can be held.
 * Prepare handlers run in the reverse order of their registration, and
 * every layer allocates under its own locks: an allocator with fork
 * handlers of its own (jemalloc registers them at its first allocation)
 * must run them after ours, so the install allocates once before it
 * registers.
 *
 * Costs: per fork, one pass over the ranks plus what the handlers do;
 * nothing here allocates after the install.  No lock of its own: a rank
 * is claimed with one atomic bit, written, then published with another.
 */
#include <pthread.h>
#include <stdlib.h>

#include "fork.h"

struct fork_handlers {
	void (*prepare)(void);
	void (*parent)(void);
	void (*child)(void);
};

static struct fork_handlers handlers[TALLY_FORK_NR_RANKS];
/* Ranks registered (bit per rank), and those the running fork prepared. */
static unsigned int registered, prepared;

_Static_assert(TALLY_FORK_NR_RANKS <= 32, "a rank per bit of the masks");

static void fork_prepare(void)
{
	prepared = __atomic_load_n(&registered, __ATOMIC_ACQUIRE);
	for (int r = 0; r < TALLY_FORK_NR_RANKS; r++)
		if ((prepared >> r & 1) && handlers[r].prepare)
			handlers[r].prepare();
}

static void fork_parent(void)
{
	for (int r = TALLY_FORK_NR_RANKS - 1; r >= 0; r--)
		if ((prepared >> r & 1) && handlers[r].parent)
			handlers[r].parent();
}

static void fork_child(void)
{
	for (int r = TALLY_FORK_NR_RANKS - 1; r >= 0; r--)
		if ((prepared >> r & 1) && handlers[r].child)
			handlers[r].child();
}

static void install(void)
{
	/* Let the allocator register its handlers first (see above). */
	free(malloc(1));
	/*
	 * Fails only without memory at load time; a library that could
	 * leave a lock held in every child is not one to go on with.
	 */
	if (pthread_atfork(fork_prepare, fork_parent, fork_child))
		abort();
}

void tally_fork_register(enum tally_fork_rank rank, void (*prepare)(void),
			 void (*parent)(void), void (*child)(void))
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	static unsigned int claimed;
	unsigned int bit;

	if ((unsigned int)rank >= TALLY_FORK_NR_RANKS)
		abort();
	bit = 1u << rank;
	pthread_once(&once, install);
	if (__atomic_fetch_or(&claimed, bit, __ATOMIC_ACQ_REL) & bit) {
		/* Once per rank: only its own layer may come again. */
		if ((__atomic_load_n(&registered, __ATOMIC_ACQUIRE) & bit) &&
		    (handlers[rank].prepare != prepare ||
		     handlers[rank].parent != parent ||
		     handlers[rank].child != child))
			abort();
		return;
	}
	handlers[rank] = (struct fork_handlers){ prepare, parent, child };
	__atomic_or_fetch(&registered, bit, __ATOMIC_RELEASE);
}

void tally_mutex_reset(pthread_mutex_t *lock)
{
	pthread_mutex_unlock(lock);
	pthread_mutex_init(lock, NULL);
}

void tally_fork_list_add(struct tally_fork_list *list,
			 struct tally_fork_node *node)
{
	pthread_mutex_lock(&list->lock);
	node->prev = NULL;
	node->next = list->head;
	if (list->head)
		list->head->prev = node;
	list->head = node;
	pthread_mutex_unlock(&list->lock);
}

void tally_fork_list_del(struct tally_fork_list *list,
			 struct tally_fork_node *node)
{
	pthread_mutex_lock(&list->lock);
	if (node->prev)
		node->prev->next = node->next;
	else
		list->head = node->next;
	if (node->next)
		node->next->prev = node->prev;
	pthread_mutex_unlock(&list->lock);
}
