// SPDX-License-Identifier: MIT
/*
 * domain.c - CPU sets, counter tree shapes and topology-aware leaf order.
 *
 * A domain maps each CPU to a leaf position of the counter tree.  Items are
 * picked by the high bits of the position (pos >> shift), so CPUs with
 * neighbouring positions share items.  Two orders exist:
 *
 *   low bits  position = bit-reverse(cpu): CPUs that agree in their low bits
 *             share items, exactly the groups of the kernel's rule;
 *   topology  CPUs sorted by (NUMA node, package, last-level cache, L2,
 *             core, cpu): CPUs that share a cache share items, so the
 *             atomic carries of one LLC stay in that LLC's cache lines.
 *
 * The shape comes from order = ceil(log2(nr_cpus)): arity at most 16, at
 * most 5 levels.  From 17 CPUs up the arities multiply to 2^order: the
 * top level is one root item.  Up to 16 CPUs the top level has 2^order /
 * (product of the arities) <= 8 items, which a counter's approximate read
 * sums: a root there would be one cache line that every CPU carries into
 * every batch (see counter.c).  Up to 8 CPUs each position has its own top
 * item (arity 1); at 9 to 16 CPUs two neighbouring positions share one
 * (arity 2): SMT siblings under the topology order on a machine of 2-way
 * SMT, and under the low bits CPUs c and c + 8, siblings on a 16-thread
 * x86 machine as Linux numbers them.  Building a domain costs
 * O(nr_cpus log nr_cpus) once; lookups are O(1).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <tally/percpu.h>
#include "contract.h"
#include "domain_internal.h"

/*
 * Arities (leaf level first) per order.  From order 5 each row multiplies
 * to 2^order (a root); below, the top level keeps 2^order / product items.
 */
static const unsigned char shape_table[][TALLY_MAX_LEVELS] = {
	[0] = { 1 },		    [1] = { 1 },
	[2] = { 1 },		    [3] = { 1 },
	[4] = { 2 },		    [5] = { 4, 4, 2 },
	[6] = { 4, 4, 4 },	    [7] = { 8, 4, 4 },
	[8] = { 8, 8, 4 },	    [9] = { 8, 8, 8 },
	[10] = { 16, 8, 8 },	    [11] = { 16, 16, 8 },
	[12] = { 8, 8, 8, 8 },	    [13] = { 16, 8, 8, 8 },
	[14] = { 16, 16, 8, 8 },    [15] = { 16, 16, 16, 8 },
	[16] = { 16, 16, 16, 16 },  [17] = { 16, 16, 16, 16, 2 },
	[18] = { 16, 16, 16, 16, 4 }, [19] = { 16, 16, 16, 16, 8 },
	[20] = { 16, 16, 16, 16, 16 },
};
#define MAX_ORDER 20u

static unsigned int log2_exact(unsigned int v)
{
	return (unsigned int)__builtin_ctz(v);
}

static unsigned int order_of(unsigned int nr_cpus)
{
	unsigned int order = 0;

	while ((1u << order) < nr_cpus)
		order++;
	return order;
}

static unsigned int bit_reverse(unsigned int v, unsigned int bits)
{
	unsigned int r = 0;

	for (unsigned int i = 0; i < bits; i++)
		r |= ((v >> i) & 1u) << (bits - 1 - i);
	return r;
}

/* Fill the shape fields; cpu_pos must already be set. */
static void build_shape(struct tally_domain *d)
{
	const unsigned char *row = shape_table[d->order];
	unsigned int shift = 0, offset = 0;

	d->nr_levels = 0;
	for (unsigned int l = 0; l < TALLY_MAX_LEVELS && row[l]; l++) {
		unsigned int nr;

		shift += log2_exact(row[l]);
		nr = (1u << d->order) >> shift;
		d->arity[l] = row[l];
		d->shift[l] = shift;
		d->offset[l] = offset;
		offset += nr;
		d->nr_levels++;
	}
	d->nr_items = offset;

	for (unsigned int l = 0; l < d->nr_levels; l++) {
		unsigned int nr = (1u << d->order) >> d->shift[l];
		unsigned char *seen = calloc(nr, 1);

		/* Without memory for the census, count every item (looser). */
		d->used[l] = seen ? 0 : nr;
		for (unsigned int cpu = 0; seen && cpu < d->nr_cpus; cpu++) {
			unsigned int item = d->cpu_pos[cpu] >> d->shift[l];

			d->used[l] += !seen[item];
			seen[item] = 1;
		}
		free(seen);
	}
}

static void set_low_bits_positions(struct tally_domain *d)
{
	for (unsigned int cpu = 0; cpu < d->nr_cpus; cpu++)
		d->cpu_pos[cpu] = bit_reverse(cpu, d->order);
	d->grouping = TALLY_GROUP_LOW_BITS;
}

static struct tally_domain *domain_alloc(unsigned int nr_cpus, bool simulated)
{
	struct tally_domain *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->cpu_pos = calloc(nr_cpus, sizeof(*d->cpu_pos));
	if (!d->cpu_pos) {
		free(d);
		return NULL;
	}
	d->nr_cpus = nr_cpus;
	d->order = order_of(nr_cpus);
	d->simulated = simulated;
	tally_percpu_pool_init(&d->pool, nr_cpus);
	return d;
}

static void domain_free(struct tally_domain *d)
{
	tally_percpu_pool_release(&d->pool);
	free(d->cpu_pos);
	free(d);
}

int tally_domain_create_simulated(struct tally_domain **out,
				  unsigned int nr_cpus,
				  enum tally_grouping grouping)
{
	struct tally_domain *d;

	if (!out || nr_cpus < 1 || nr_cpus > TALLY_SIMULATED_MAX_CPUS ||
	    grouping != TALLY_GROUP_LOW_BITS)
		return -EINVAL;
	d = domain_alloc(nr_cpus, true);
	if (!d)
		return -ENOMEM;
	set_low_bits_positions(d);
	build_shape(d);
	*out = d;
	return 0;
}

/* --- sysfs parsing ------------------------------------------------------ */

/* Read a small sysfs file into @buf; returns 0 or -errno. */
static int read_text(const char *root, const char *rel, char *buf, size_t len)
{
	char path[PATH_MAX];
	FILE *f;
	size_t n;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", root, rel) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "r");
	if (!f)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	return 0;
}

static int read_long(const char *root, const char *rel, long *v)
{
	char buf[64], *end;
	int err = read_text(root, rel, buf, sizeof(buf));

	if (err)
		return err;
	errno = 0;
	*v = strtol(buf, &end, 10);
	if (errno || end == buf)
		return -EINVAL;
	return 0;
}

/*
 * Parse a CPU list ("0-3,8,10-11\n").  Calls @fn for each CPU; stops at
 * @limit.  Returns the highest CPU + 1, or -EINVAL when malformed.
 */
static long parse_cpu_list(const char *s, unsigned int limit,
			   void (*fn)(unsigned int cpu, void *arg), void *arg)
{
	long top = 0;

	while (*s && *s != '\n') {
		char *end;
		unsigned long lo, hi;

		if (*s < '0' || *s > '9')
			return -EINVAL;
		lo = strtoul(s, &end, 10);
		hi = lo;
		s = end;
		if (*s == '-') {
			s++;
			if (*s < '0' || *s > '9')
				return -EINVAL;
			hi = strtoul(s, &end, 10);
			s = end;
		}
		if (hi < lo || hi >= limit)
			return -EINVAL;
		for (unsigned long cpu = lo; cpu <= hi; cpu++)
			if (fn)
				fn((unsigned int)cpu, arg);
		if ((long)hi + 1 > top)
			top = (long)hi + 1;
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return -EINVAL;
	}
	return top ? top : -EINVAL;
}

struct cpu_key {
	long node, package, llc, l2, core;
	unsigned int cpu;
	bool present;
};

static void mark_present(unsigned int cpu, void *arg)
{
	((struct cpu_key *)arg)[cpu].present = true;
}

struct node_arg {
	struct cpu_key *keys;
	long node;
};

static void mark_node(unsigned int cpu, void *arg)
{
	struct node_arg *na = arg;

	na->keys[cpu].node = na->node;
}

/* First CPU of a shared_cpu_list / siblings list, or -1. */
static long first_cpu_of(const char *root, const char *rel)
{
	char buf[4096];
	unsigned long v;
	char *end;

	if (read_text(root, rel, buf, sizeof(buf)))
		return -1;
	v = strtoul(buf, &end, 10);
	return end == buf ? -1 : (long)v;
}

/* Fill keys[cpu]; returns true when any topology was found. */
static bool read_cpu_topology(const char *root, struct cpu_key *k,
			      unsigned int cpu)
{
	char rel[128];
	bool found = false;
	long v;

	k->package = k->llc = k->l2 = k->core = -1;
	snprintf(rel, sizeof(rel), "cpu/cpu%u/topology/physical_package_id",
		 cpu);
	if (!read_long(root, rel, &v)) {
		k->package = v;
		found = true;
	}
	snprintf(rel, sizeof(rel), "cpu/cpu%u/topology/thread_siblings_list",
		 cpu);
	k->core = first_cpu_of(root, rel);
	found |= k->core >= 0;

	for (unsigned int idx = 0; idx < 8; idx++) {
		char type[32];
		long level, first;

		snprintf(rel, sizeof(rel), "cpu/cpu%u/cache/index%u/level", cpu,
			 idx);
		if (read_long(root, rel, &level))
			break;
		snprintf(rel, sizeof(rel), "cpu/cpu%u/cache/index%u/type", cpu,
			 idx);
		if (read_text(root, rel, type, sizeof(type)) ||
		    !strncmp(type, "Instruction", 11))
			continue;
		snprintf(rel, sizeof(rel),
			 "cpu/cpu%u/cache/index%u/shared_cpu_list", cpu, idx);
		first = first_cpu_of(root, rel);
		if (first < 0)
			continue;
		found = true;
		if (level == 2)
			k->l2 = first;
		if (level >= 2 && (k->llc < 0 || level >= 3))
			k->llc = first;
	}
	return found;
}

static int compare_keys(const void *pa, const void *pb)
{
	const struct cpu_key *a = pa, *b = pb;
	const long ka[] = { !a->present, a->node, a->package, a->llc, a->l2,
			    a->core, a->cpu };
	const long kb[] = { !b->present, b->node, b->package, b->llc, b->l2,
			    b->core, b->cpu };

	for (size_t i = 0; i < sizeof(ka) / sizeof(ka[0]); i++)
		if (ka[i] != kb[i])
			return ka[i] < kb[i] ? -1 : 1;
	return 0;
}

/* Order CPUs by topology; false when sysfs has none. */
static bool set_topology_positions(struct tally_domain *d, const char *root)
{
	struct cpu_key *keys = calloc(d->nr_cpus, sizeof(*keys));
	char path[PATH_MAX], buf[4096];
	bool found = false;
	DIR *dir;

	if (!keys)
		return false;
	for (unsigned int cpu = 0; cpu < d->nr_cpus; cpu++)
		keys[cpu].cpu = cpu;
	if (!read_text(root, "cpu/possible", buf, sizeof(buf)))
		parse_cpu_list(buf, d->nr_cpus, mark_present, keys);

	snprintf(path, sizeof(path), "%s/node", root);
	dir = opendir(path);
	if (dir) {
		struct dirent *e;

		while ((e = readdir(dir))) {
			struct node_arg na = { keys, 0 };
			char rel[300];

			if (strncmp(e->d_name, "node", 4) ||
			    e->d_name[4] < '0' || e->d_name[4] > '9')
				continue;
			na.node = strtol(e->d_name + 4, NULL, 10);
			snprintf(rel, sizeof(rel), "node/%s/cpulist", e->d_name);
			if (read_text(root, rel, buf, sizeof(buf)))
				continue;
			if (parse_cpu_list(buf, d->nr_cpus, mark_node, &na) > 0)
				found = true;
		}
		closedir(dir);
	}
	for (unsigned int cpu = 0; cpu < d->nr_cpus; cpu++)
		if (keys[cpu].present)
			found |= read_cpu_topology(root, &keys[cpu], cpu);

	if (found) {
		qsort(keys, d->nr_cpus, sizeof(*keys), compare_keys);
		for (unsigned int rank = 0; rank < d->nr_cpus; rank++)
			d->cpu_pos[keys[rank].cpu] = rank;
		d->grouping = TALLY_GROUP_TOPOLOGY;
	}
	free(keys);
	return found;
}

int tally_domain_create_from_sysfs(struct tally_domain **out,
				   const char *sysfs_root,
				   enum tally_grouping grouping)
{
	struct tally_domain *d;
	char buf[4096];
	long nr;
	int err;

	if (!out || !sysfs_root ||
	    (grouping != TALLY_GROUP_LOW_BITS &&
	     grouping != TALLY_GROUP_TOPOLOGY))
		return -EINVAL;
	err = read_text(sysfs_root, "cpu/possible", buf, sizeof(buf));
	if (err)
		return err == -ENOENT ? -ENOENT : err;
	nr = parse_cpu_list(buf, TALLY_SIMULATED_MAX_CPUS, NULL, NULL);
	if (nr < 0)
		return -EINVAL;
	d = domain_alloc((unsigned int)nr, true);
	if (!d)
		return -ENOMEM;
	set_low_bits_positions(d);
	if (grouping == TALLY_GROUP_TOPOLOGY)
		set_topology_positions(d, sysfs_root);
	build_shape(d);
	*out = d;
	return 0;
}

/* --- the system domain -------------------------------------------------- */

#define SYSFS "/sys/devices/system"

static struct tally_domain *system_domain;
static int system_domain_err;
static pthread_once_t system_once = PTHREAD_ONCE_INIT;

/* Number of possible CPUs under @root (highest id + 1), or -errno. */
static long possible_cpus(const char *root)
{
	char buf[4096];
	long nr;
	int err = read_text(root, "cpu/possible", buf, sizeof(buf));

	if (err)
		return err;
	nr = parse_cpu_list(buf, 1u << MAX_ORDER, NULL, NULL);
	return nr < 0 ? -EINVAL : nr;
}

/* Highest set bit + 1 of a CPU mask of @len bytes, or 0. */
static long mask_top(const unsigned long *mask, size_t len)
{
	for (size_t i = len / sizeof(*mask); i-- > 0;)
		if (mask[i])
			return (long)(i * 64 + 64 -
				      (size_t)__builtin_clzl(mask[i]));
	return 0;
}

/*
 * The CPU numbers this process can see without sysfs: the configured
 * count, the highest CPU of the affinity mask, the CPU it runs on.  With
 * @width, also the width of the kernel's CPU masks, which bounds every CPU
 * number the kernel can ever report (the raw sched_getaffinity() returns
 * how many bytes of mask the kernel has).
 */
static long kernel_cpus(bool width)
{
	long nr = sysconf(_SC_NPROCESSORS_CONF), here = sched_getcpu() + 1;
	size_t len = 128;
	unsigned long *mask = NULL;

	for (; len <= (1u << MAX_ORDER) / 8; len *= 2) {
		long got;

		free(mask);
		mask = malloc(len);
		if (!mask)
			break;
		got = syscall(SYS_sched_getaffinity, 0, len, mask);
		if (got > 0) {
			if (width && got * 8 > nr)
				nr = got * 8;
			if (mask_top(mask, (size_t)got) > nr)
				nr = mask_top(mask, (size_t)got);
			break;
		}
	}
	free(mask);
	return here > nr ? here : nr;
}

/*
 * Slots for every CPU the kernel may report, whatever a fixture claims:
 * the real possible list (the kernel never reports a CPU beyond it) or,
 * when /sys cannot be read, the kernel's CPU mask width; and at least the
 * CPUs seen at work.  So the rseq cpu_id of any thread, now or later,
 * always names a slot: the update paths need no bounds check.
 */
static void build_system_domain(void)
{
	const char *root = getenv("TALLY_SYSFS_ROOT");
	long nr = possible_cpus(SYSFS), seen;
	struct tally_domain *d;

	seen = kernel_cpus(nr < 0);
	if (root && *root) {
		long claimed = possible_cpus(root);

		if (claimed < 0) {
			system_domain_err = (int)-claimed;
			return;
		}
		if (claimed > nr)
			nr = claimed;
	} else {
		root = SYSFS;
	}
	if (seen > nr)
		nr = seen;
	if (nr > 1l << MAX_ORDER) {
		system_domain_err = ERANGE;
		return;
	}
	d = domain_alloc((unsigned int)nr, false);
	if (!d) {
		system_domain_err = ENOMEM;
		return;
	}
	set_low_bits_positions(d);
	set_topology_positions(d, root);
	build_shape(d);
	__atomic_store_n(&system_domain, d, __ATOMIC_RELEASE);
}

struct tally_domain *tally_domain_system(void)
{
	pthread_once(&system_once, build_system_domain);
	if (!system_domain)
		errno = system_domain_err;
	return system_domain;
}

struct tally_domain *tally_domain_resolve(struct tally_domain *d)
{
	return d ? d : tally_domain_system();
}

void *tally_percpu_alloc(struct tally_domain *d, size_t size, size_t align)
{
	d = tally_domain_resolve(d);
	if (!d) {
		errno = EINVAL;
		return NULL;
	}
	return tally_percpu_pool_alloc(&d->pool, size, align);
}

void tally_percpu_free(struct tally_domain *d, void *ptr)
{
	d = tally_domain_resolve(d);
	if (d)
		tally_percpu_pool_free(&d->pool, ptr);
}

void tally_domain_destroy(struct tally_domain *d)
{
	/* Atomic: the system domain may be being built in another thread. */
	if (d && d != __atomic_load_n(&system_domain, __ATOMIC_ACQUIRE))
		domain_free(d);
}

/* Getters answer a count or a flag: NULL breaks their contract. */
static void require_domain(const struct tally_domain *d, const char *fn)
{
	if (__builtin_expect(!d, 0))
		contract_null_abort(fn, "domain");
}

unsigned int tally_domain_nr_cpus(const struct tally_domain *d)
{
	require_domain(d, __func__);
	return d->nr_cpus;
}

bool tally_domain_is_simulated(const struct tally_domain *d)
{
	require_domain(d, __func__);
	return d->simulated;
}

unsigned int tally_domain_shape(const struct tally_domain *d,
				unsigned int *arity)
{
	require_domain(d, __func__);
	if (arity)
		for (unsigned int l = 0; l < TALLY_MAX_LEVELS; l++)
			arity[l] = l < d->nr_levels ? d->arity[l] : 0;
	return d->nr_levels;
}

int tally_domain_cpu_position(const struct tally_domain *d, unsigned int cpu)
{
	if (!d || cpu >= d->nr_cpus)
		return -EINVAL;
	return (int)d->cpu_pos[cpu];
}

enum tally_grouping tally_domain_grouping(const struct tally_domain *d)
{
	require_domain(d, __func__);
	return d->grouping;
}
