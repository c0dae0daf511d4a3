// SPDX-License-Identifier: MIT
/*
 * tally_jemalloc.c - jemalloc's pages charged to memory groups through
 * per-group arenas and extent hooks (tally/jemalloc.h has the design).
 *
 * This half keeps the arenas and the groups: every arena jemalloc has is
 * described by a struct arena (jemalloc_internal.h) whose extent hooks
 * (tally_jemalloc_hooks.c) charge the group the arena is given to; a
 * group gets opts.arenas_per_group arenas of its own, taken from a pool of
 * empty ones, and a thread is bound to one of its current group's.
 * The hooks charge without calling back into jemalloc or user code; the
 * purge, the reclaim callbacks and the OOM policy of a charge that did not
 * fit run in tally_jemalloc_make_room(), after the allocation failed,
 * where jemalloc holds no lock.
 *
 * Locks: one mutex (fork-safe) over the table of groups and the free
 * arenas; the hooks take none of ours.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <jemalloc/jemalloc.h>

#include <tally/jemalloc.h>
#include <tally/memcg_current.h>

#include "jemalloc_internal.h"

/* The arenas of one group. */
struct group_arenas {
	struct tally_memcg *group;
	unsigned int nr;
	struct arena *arena[MAX_SHARDS];
	struct group_arenas *next;	/* in groups or retired */
};

static struct {
	pthread_mutex_t lock;
	bool installed;
	struct tally_jemalloc_options opts;
	struct arena arenas[MAX_ARENAS];	/* by jemalloc index */
	struct group_arenas *groups;	/* live groups' arenas */
	struct group_arenas *retired;	/* released, not empty yet */
	struct arena *pool;		/* empty arenas for new groups */
	size_t mib_thread_arena[2], mib_flush[3];
	size_t page;
	atomic_uint next_shard;
	long adopted;			/* charged by install_auto() */
	unsigned long releases;		/* tally_jemalloc_release() calls */
	pthread_key_t room_key;		/* returns a thread's room at exit */
} tj = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The thread's arena as we last set it (-1: never set by us). */
static __thread int thread_arena = -1;
static __thread int thread_auto_arena = -1;
static __thread unsigned int thread_shard;
static __thread bool thread_has_shard;

/*
 * The thread's last groups and the arena each one bound it to: a switch
 * among them (a server that sets each request's tenant group, most
 * often the one the thread is in) takes no lock and searches nothing.
 * The entries hold while tj.releases is what it was when they were made:
 * a group keeps its arenas until tally_jemalloc_release(), and until then
 * the arenas' references keep its address from being reused.
 */
#define RECENT_GROUPS 4
static __thread struct recent_group {
	struct tally_memcg *group;
	int arena;
} thread_recent[RECENT_GROUPS];
static __thread unsigned long thread_recent_releases;
static __thread unsigned int thread_recent_next;
/*
 * Every group reference the integration takes or drops: an arena holds
 * its group from the moment it is given to it until it goes back to the
 * pool, so that its pages can be uncharged from that group (or, once it
 * is destroyed, its nearest live ancestor) whoever frees them.
 */
static void group_hold(struct tally_memcg *g)
{
	tally_memcg_get(g);
}

static void group_drop(struct tally_memcg *g)
{
	tally_memcg_put(g);
}

/*
 * fork(): the integration keeps a pthread_atfork() handler of its own
 * rather than a rank in libtally's registry (runtime/fork.h), which is
 * internal to libtally and would have to join its exported interface.
 * The order comes out right by construction: tj.lock is held while the
 * integration calls mallctl() (jemalloc's locks) and drops group
 * references (the memory groups' locks), so it must be taken before
 * both; prepare handlers run in the reverse order of registration, and
 * this one is registered by tally_jemalloc_init(), after libtally's
 * (registered when libtally is loaded) and after jemalloc's (registered
 * by jemalloc's first allocation, which the install's mallctl() calls
 * follow).  Before tj.lock it closes the hooks' fork gate
 * (tally_jemalloc_hooks.c): the hooks that charge slowly, with an arena's
 * lock held, take the tree's and jemalloc's locks, so they must be out
 * before the fork takes those.
 */
static void prefork(void)
{
	/* First the hooks' fork gate: a hook inside may call back into the
	 * integration (a reclaim callback), never the other way round. */
	tally_je_gate_close();
	pthread_mutex_lock(&tj.lock);
}

static void postfork_parent(void)
{
	pthread_mutex_unlock(&tj.lock);
	tally_je_gate_open();
}

static void postfork_child(void)
{
	pthread_mutex_unlock(&tj.lock);
	tally_je_gate_reset();
}

static int read_size(const char *name, size_t *out)
{
	size_t len = sizeof(*out);

	return mallctl(name, out, &len, NULL, 0);
}

/* The arena's pactive, pdirty and pmuzzy, in bytes (stats refreshed). */
static void arena_pages(unsigned int ind, long *active, long *dirty,
			long *muzzy)
{
	const char *item[3] = { "pactive", "pdirty", "pmuzzy" };
	long *out[3] = { active, dirty, muzzy };
	char name[64];
	size_t v;

	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "stats.arenas.%u.%s", ind,
			 item[i]);
		*out[i] = read_size(name, &v) ? 0 : (long)(v * tj.page);
	}
}

static void refresh_stats(void)
{
	uint64_t epoch = 1;
	size_t len = sizeof(epoch);

	mallctl("epoch", &epoch, &len, &epoch, sizeof(epoch));
}

/*
 * Give the automatic arenas our hooks, charged to @g.  Those that exist
 * keep what they hold, charged now: their active, dirty and muzzy pages
 * and their retained address space, which the default hooks left
 * committed; the others are initialized with our hooks (writing
 * arena.<i>.extent_hooks for an index below narenas does it), their
 * metadata uncharged.
 */
static int install_auto(struct tally_memcg *g)
{
	unsigned int narenas, nauto;
	size_t len = sizeof(narenas), oversize = 0;
	long held[MAX_ARENAS], total = 0;	/* -1: not hooked */
	char name[64];

	if (mallctl("arenas.narenas", &narenas, &len, NULL, 0) ||
	    mallctl("opt.narenas", &nauto, &len, NULL, 0))
		return -ENOTSUP;
	/*
	 * jemalloc's huge arena (index nauto, for allocations of
	 * opt.oversize_threshold bytes and more) is created on its first use
	 * with the default hooks, and its index cannot be initialized
	 * through arena.<i>.extent_hooks: make it exist now, so that it gets
	 * the hooks like the others (this thread is on an automatic arena).
	 */
	read_size("opt.oversize_threshold", &oversize);
	if (oversize && narenas > nauto) {
		void *p = mallocx(oversize, MALLOCX_TCACHE_NONE);

		if (p)
			dallocx(p, MALLOCX_TCACHE_NONE);
	}
	if (narenas > MAX_ARENAS)
		narenas = MAX_ARENAS;
	refresh_stats();
	/*
	 * What the arenas hold is adopted, charged at once: a max below it
	 * is refused before anything is hooked.
	 */
	for (unsigned int i = 0; i < narenas; i++) {
		bool init = false;

		held[i] = -1;		/* not hooked */
		snprintf(name, sizeof(name), "arena.%u.initialized", i);
		len = sizeof(init);
		if (mallctl(name, &init, &len, NULL, 0))
			return -ENOTSUP;
		if (!init && i >= nauto)
			continue;	/* a huge arena that could not be made */
		held[i] = 0;
		if (init) {
			long active, dirty, muzzy;
			size_t retained = 0;

			arena_pages(i, &active, &dirty, &muzzy);
			snprintf(name, sizeof(name),
				 "stats.arenas.%u.retained", i);
			read_size(name, &retained);
			held[i] = active + dirty + muzzy + (long)retained;
		}
		total += held[i];
	}
	if (total > 0) {
		int err = tally_memcg_charge(g, total, TALLY_MEMCG_NOFAIL);

		if (err < 0)
			return err;
		tally_memcg_stat_mod(g, TALLY_MEMCG_ANON, total);
	}
	for (unsigned int i = 0; i < narenas; i++) {
		struct arena *a = &tj.arenas[i];
		extent_hooks_t *hp = &a->hooks;

		if (held[i] < 0)
			continue;
		tally_je_hooks_init(a, i);
		a->is_auto = true;
		group_hold(g);
		atomic_store(&a->group, g);
		atomic_store(&a->charged, held[i]);
		tj.adopted += held[i];
		snprintf(name, sizeof(name), "arena.%u.extent_hooks", i);
		tally_je_installing(true);
		int ret = mallctl(name, NULL, NULL, &hp, sizeof(hp));
		tally_je_installing(false);
		if (ret)
			return -ENOTSUP;
	}
	return 0;
}

/*
 * The threads of the process, from /proc/self/stat (its 20th field,
 * num_threads), read with open() and read() into the stack: the check
 * runs before the hooks exist and must not allocate.  0 when it cannot be
 * read (no /proc): the caller then cannot be checked.
 */
static long process_threads(void)
{
	char buf[512], *p;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n;
	long v = 0;

	if (fd < 0)
		return 0;
	do
		n = read(fd, buf, sizeof(buf) - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* The name (field 2) may hold spaces and ')': it ends at the last. */
	p = strrchr(buf, ')');
	/* Fields 3 to 19 come before num_threads. */
	for (int field = 2; p && field < 20; field++)
		p = strchr(p + 1, ' ');
	if (!p)
		return 0;
	for (p++; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (*p - '0');
	return v;
}

/*
 * Whether the process has another thread: it may hold pages and a thread
 * cache of an automatic arena, or be inside jemalloc, while the hooks are
 * installed, and what it frees or allocates then is not what the
 * adoption saw.  The kernel counts a thread until a moment after
 * pthread_join() returned: a count above 1 is read again for up to
 * 20 ms before it is believed.
 */
static bool other_threads(void)
{
	struct timespec ms = { 0, 1000000 };

	for (int i = 0; i < 20; i++) {
		if (process_threads() <= 1)
			return false;
		nanosleep(&ms, NULL);
	}
	return true;
}

static void room_at_exit(void *unused)
{
	(void)unused;
	tally_je_room_return();
}

int tally_jemalloc_init(const struct tally_jemalloc_options *opts)
{
	struct tally_jemalloc_options o = { 0 };
	const char *version;
	size_t len = sizeof(version), miblen;
	int ret = 0;

	if (opts)
		o = *opts;
	if (o.arenas_per_group > MAX_SHARDS)
		return -EINVAL;
	if (!o.arenas_per_group) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		o.arenas_per_group = n < 1 ? 1 : n > (long)DEFAULT_SHARDS_MAX ?
			DEFAULT_SHARDS_MAX : (unsigned int)n;
	}
	pthread_mutex_lock(&tj.lock);
	if (tj.installed) {
		ret = -EBUSY;
		goto out;
	}
	if (other_threads()) {
		ret = -EBUSY;
		goto out;
	}
	if (mallctl("version", &version, &len, NULL, 0) ||
	    version[0] != '5' || version[1] != '.') {
		ret = -ENOTSUP;
		goto out;
	}
	if (tally_je_hooks_setup() || read_size("arenas.page", &tj.page)) {
		ret = -ENOTSUP;
		goto out;
	}
	miblen = 2;
	if (mallctlnametomib("thread.arena", tj.mib_thread_arena, &miblen)) {
		ret = -ENOTSUP;
		goto out;
	}
	miblen = 3;
	if (mallctlnametomib("thread.tcache.flush", tj.mib_flush, &miblen)) {
		ret = -ENOTSUP;
		goto out;
	}
	tj.opts = o;
	if (o.auto_group) {
		ret = install_auto(o.auto_group);
		if (ret)
			goto out;
	}
	if (pthread_key_create(&tj.room_key, room_at_exit) ||
	    pthread_atfork(prefork, postfork_parent, postfork_child)) {
		ret = -ENOMEM;
		goto out;
	}
	__atomic_store_n(&tj.installed, true, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&tj.lock);
	return ret;
}

/*
 * A new arena with our hooks.  Its metadata stays on jemalloc's default
 * hooks (experimental.arenas_create_ext's metadata_use_hooks, jemalloc
 * 5.3): only pages that hold objects are charged.  jemalloc's
 * arena_config_t is { extent_hooks_t *; bool }.
 */
static struct arena *arena_create(void)
{
	static struct arena scratch;
	struct {
		extent_hooks_t *extent_hooks;
		bool metadata_use_hooks;
	} config = { &scratch.hooks, false };
	unsigned int ind;
	size_t len = sizeof(ind);

	/* jemalloc may call the hooks of an arena as it creates it: the
	 * index is not known before, so they start on a scratch arena with
	 * no group (nothing is charged), then move to the real one. */
	tally_je_hooks_init(&scratch, UINT32_MAX);
	if (mallctl("experimental.arenas_create_ext", &ind, &len, &config,
		    sizeof(config))) {
		len = sizeof(ind);
		if (mallctl("arenas.create", &ind, &len, &config.extent_hooks,
			    sizeof(config.extent_hooks)))
			return NULL;
	}
	if (ind >= MAX_ARENAS)
		return NULL;	/* leaked: jemalloc refuses it anyway */
	struct arena *a = &tj.arenas[ind];
	extent_hooks_t *hp = &a->hooks;
	char name[64];

	tally_je_hooks_init(a, ind);
	snprintf(name, sizeof(name), "arena.%u.extent_hooks", ind);
	if (mallctl(name, NULL, NULL, &hp, sizeof(hp)))
		return NULL;
	atomic_store(&a->charged, atomic_load(&scratch.charged));
	atomic_store(&scratch.charged, 0);
	return a;
}

static void arena_purge(unsigned int ind)
{
	char name[64];

	snprintf(name, sizeof(name), "arena.%u.purge", ind);
	mallctl(name, NULL, NULL, NULL, 0);
}

/* Move the retired groups' arenas that hold nothing to the pool. */
static void recycle_retired(void)
{
	for (struct group_arenas **pp = &tj.retired; *pp;) {
		struct group_arenas *ga = *pp;
		unsigned int left = 0;

		for (unsigned int i = 0; i < ga->nr; i++) {
			struct arena *a = ga->arena[i];

			if (!a)
				continue;
			arena_purge(a->ind);
			if (atomic_load(&a->charged) != 0) {
				left++;
				continue;
			}
			atomic_store(&a->group, NULL);
			group_drop(ga->group);
			a->next_free = tj.pool;
			tj.pool = a;
			ga->arena[i] = NULL;
		}
		if (left) {
			pp = &ga->next;
		} else {
			*pp = ga->next;
			dallocx(ga, MALLOCX_TCACHE_NONE);
		}
	}
}

static struct group_arenas *find_locked(struct tally_memcg *g)
{
	for (struct group_arenas *ga = tj.groups; ga; ga = ga->next)
		if (ga->group == g)
			return ga;
	return NULL;
}

static struct group_arenas *get_arenas_locked(struct tally_memcg *g)
{
	struct group_arenas *ga = find_locked(g);

	if (ga)
		return ga;
	/* Not from the thread's arena: that may be a group's. */
	ga = mallocx(sizeof(*ga), MALLOCX_ARENA(0) | MALLOCX_TCACHE_NONE |
		     MALLOCX_ZERO);
	if (!ga)
		return NULL;
	recycle_retired();
	for (unsigned int i = 0; i < tj.opts.arenas_per_group; i++) {
		struct arena *a = tj.pool;

		if (a)
			tj.pool = a->next_free;
		else
			a = arena_create();
		if (!a)
			break;
		group_hold(g);
		atomic_store_explicit(&a->group, g, memory_order_release);
		ga->arena[ga->nr++] = a;
	}
	if (!ga->nr) {
		dallocx(ga, MALLOCX_TCACHE_NONE);
		return NULL;
	}
	ga->group = g;
	ga->next = tj.groups;
	tj.groups = ga;
	return ga;
}

/* Bind the calling thread to arena @ind, flushing its cache first. */
static void bind_thread(int ind)
{
	unsigned int u = (unsigned int)ind;

	if (ind == thread_arena)
		return;
	if (!tj.opts.keep_tcache)
		mallctlbymib(tj.mib_flush, 3, NULL, NULL, NULL, 0);
	if (!mallctlbymib(tj.mib_thread_arena, 2, NULL, NULL, &u, sizeof(u)))
		thread_arena = ind;
}

/* Forget the thread's recent groups if a release came since they were
 * noted; true when they still hold. */
static bool recent_hold(unsigned long releases)
{
	if (releases == thread_recent_releases)
		return true;
	memset(thread_recent, 0, sizeof(thread_recent));
	thread_recent_releases = releases;
	return false;
}

/* The arena of @g noted for this thread, or -1. */
static int recent_arena(const struct tally_memcg *g)
{
	if (!recent_hold(__atomic_load_n(&tj.releases, __ATOMIC_ACQUIRE)))
		return -1;
	for (unsigned int i = 0; i < RECENT_GROUPS; i++)
		if (thread_recent[i].group == g)
			return thread_recent[i].arena;
	return -1;
}

/* Note @g's arena for this thread: tj.lock held (tj.releases stable). */
static void note_recent_locked(struct tally_memcg *g, int arena)
{
	recent_hold(tj.releases);
	thread_recent[thread_recent_next] = (struct recent_group){ g, arena };
	thread_recent_next = (thread_recent_next + 1) % RECENT_GROUPS;
}

/* The arena of @g for this thread, under tj.lock (noted), or -1. */
static int look_up_arena(struct tally_memcg *g)
{
	struct group_arenas *ga;
	int arena = -1;

	if (!thread_has_shard) {
		thread_shard = atomic_fetch_add(&tj.next_shard, 1);
		thread_has_shard = true;
	}
	pthread_mutex_lock(&tj.lock);
	ga = get_arenas_locked(g);
	if (ga) {
		arena = (int)ga->arena[thread_shard % ga->nr]->ind;
		note_recent_locked(g, arena);
	}
	pthread_mutex_unlock(&tj.lock);
	return arena;
}

struct tally_memcg *tally_jemalloc_set_current(struct tally_memcg *g)
{
	struct tally_memcg *prev = tally_memcg_set_current(g);
	struct tally_memcg *eff = tally_memcg_current();
	int target = -1;

	if (!__atomic_load_n(&tj.installed, __ATOMIC_ACQUIRE))
		return prev;
	if (thread_auto_arena < 0) {
		unsigned int cur;
		size_t len = sizeof(cur);

		if (mallctlbymib(tj.mib_thread_arena, 2, &cur, &len, NULL, 0))
			return prev;
		thread_auto_arena = (int)cur;
		thread_arena = (int)cur;
	}
	if (eff && eff != tj.opts.auto_group) {
		target = recent_arena(eff);
		if (target < 0)
			target = look_up_arena(eff);
	}
	bind_thread(target >= 0 ? target : thread_auto_arena);
	return prev;
}

int tally_jemalloc_flush(void)
{
	if (!__atomic_load_n(&tj.installed, __ATOMIC_ACQUIRE))
		return -ENOTSUP;
	mallctlbymib(tj.mib_flush, 3, NULL, NULL, NULL, 0);
	return 0;
}

int tally_jemalloc_purge(struct tally_memcg *g)
{
	int ret = 0;

	if (!__atomic_load_n(&tj.installed, __ATOMIC_ACQUIRE))
		return -ENOTSUP;
	if (!g) {
		arena_purge(MALLCTL_ARENAS_ALL);
		return 0;
	}
	pthread_mutex_lock(&tj.lock);
	struct group_arenas *ga = find_locked(g);

	if (!ga)
		ret = -ENOENT;
	else
		for (unsigned int i = 0; i < ga->nr; i++)
			arena_purge(ga->arena[i]->ind);
	pthread_mutex_unlock(&tj.lock);
	return ret;
}

int tally_jemalloc_make_room(void)
{
	struct tally_memcg *g;
	struct arena *a;
	size_t n;
	int ret;

	if (!__atomic_load_n(&tj.installed, __ATOMIC_ACQUIRE))
		return -ENOTSUP;
	tally_je_room_return();
	if (!tally_je_room_wanted(&a, &n))
		return -ENOENT;
	arena_purge(MALLCTL_ARENAS_ALL);
	/*
	 * The bytes join the arena's charged count under the lock, before
	 * they are charged: an arena that holds a charge is never given to
	 * another group, so its group (and the arena's reference to it)
	 * stays until the room is taken or returned.
	 */
	pthread_mutex_lock(&tj.lock);
	g = atomic_load(&a->group);
	if (g)
		atomic_fetch_add(&a->charged, (long)n);
	pthread_mutex_unlock(&tj.lock);
	if (!g)
		return -ENOENT;
	ret = tally_memcg_charge(g, (long)n, 0);
	if (ret < 0) {
		atomic_fetch_sub(&a->charged, (long)n);
		return ret;
	}
	tally_memcg_stat_mod(g, TALLY_MEMCG_ANON, (long)n);
	tally_je_room_prepaid(a, n);
	/* Non-NULL, so that the key's destructor runs at the thread's exit
	 * (one of the first keys: no allocation). */
	pthread_setspecific(tj.room_key, a);
	return 0;
}

int tally_jemalloc_release(struct tally_memcg *g)
{
	int ret = 0;

	if (!__atomic_load_n(&tj.installed, __ATOMIC_ACQUIRE))
		return -ENOTSUP;
	pthread_mutex_lock(&tj.lock);
	struct group_arenas **pp = &tj.groups;

	while (*pp && (*pp)->group != g)
		pp = &(*pp)->next;
	if (!*pp) {
		ret = -ENOENT;
	} else {
		struct group_arenas *ga = *pp;

		/* Before its arenas can go: threads forget where g was. */
		__atomic_store_n(&tj.releases, tj.releases + 1,
				 __ATOMIC_RELEASE);
		*pp = ga->next;
		ga->next = tj.retired;
		tj.retired = ga;
		recycle_retired();
	}
	pthread_mutex_unlock(&tj.lock);
	return ret;
}

/* Add arena @a's pages and charge to @out (stats refreshed). */
static void add_arena(const struct arena *a, struct tally_jemalloc_stats *out)
{
	long active, dirty, muzzy;

	arena_pages(a->ind, &active, &dirty, &muzzy);
	out->active += active;
	out->dirty += dirty;
	out->muzzy += muzzy;
	out->charged += atomic_load(&a->charged);
	out->arenas++;
}

int tally_jemalloc_stats(struct tally_memcg *g,
			 struct tally_jemalloc_stats *out)
{
	int ret = 0;

	if (!out)
		return -EINVAL;
	if (!__atomic_load_n(&tj.installed, __ATOMIC_ACQUIRE))
		return -ENOTSUP;
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&tj.lock);
	refresh_stats();
	if (g) {
		struct group_arenas *ga = find_locked(g);

		if (!ga)
			for (ga = tj.retired; ga && ga->group != g;)
				ga = ga->next;
		if (!ga)
			ret = -ENOENT;
		else
			for (unsigned int i = 0; i < ga->nr; i++)
				if (ga->arena[i])
					add_arena(ga->arena[i], out);
	} else {
		for (unsigned int i = 0; i < MAX_ARENAS; i++)
			if (tj.arenas[i].is_auto)
				add_arena(&tj.arenas[i], out);
		out->adopted = tj.adopted;
	}
	pthread_mutex_unlock(&tj.lock);
	return ret;
}
