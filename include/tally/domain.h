/* SPDX-License-Identifier: MIT */
#ifndef TALLY_DOMAIN_H
#define TALLY_DOMAIN_H

/*
 * tally/domain.h - the set of CPUs that per-CPU data is laid out for.
 *
 * A domain fixes three things for every per-CPU object built on it:
 *   - nr_cpus, the number of per-CPU slots (highest possible CPU + 1);
 *   - the tree shape of hierarchical counters (arity per level);
 *   - the position of each CPU among the leaves of that tree, so that
 *     CPUs sharing a cache or a NUMA node share tree items.
 *
 * The system domain describes this machine (its *possible* CPUs, never the
 * online ones) and is updated through restartable sequences on the CPU the
 * thread runs on.  A simulated domain has any CPU count from 1 to
 * TALLY_SIMULATED_MAX_CPUS; its updates name their CPU explicitly and are
 * atomic, so tests and benchmarks can build 64-, 384- or 4096-CPU trees on
 * a 2-core machine.
 *
 * NULL: the getters (nr_cpus, is_simulated, shape, grouping) answer a
 * count or a flag, where an error code would read as one: a NULL domain
 * breaks their contract, and they write "tally: FN() called with a NULL
 * domain" to stderr and abort(), in every build.  Use
 * tally_domain_system() for this machine's domain.
 */

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Largest CPU count of a simulated domain. */
#define TALLY_SIMULATED_MAX_CPUS 4096u

/** Largest number of tree levels above the per-CPU level. */
#define TALLY_MAX_LEVELS 5

struct tally_domain;

/**
 * enum tally_grouping - how CPUs are assigned to tree items.
 * @TALLY_GROUP_LOW_BITS: the kernel's rule: CPUs whose numbers agree in
 *	their low bits share an item (cpu 0 and cpu 8 share a leaf item of
 *	a 16-CPU binary level).  Ignores the cache topology.
 * @TALLY_GROUP_TOPOLOGY: CPUs are ordered by NUMA node, last-level cache,
 *	core cluster and core, so that neighbours share items.  Falls back to
 *	%TALLY_GROUP_LOW_BITS when the topology cannot be read.
 */
enum tally_grouping {
	TALLY_GROUP_LOW_BITS = 0,
	TALLY_GROUP_TOPOLOGY = 1,
};

/**
 * tally_domain_system() - the domain of this machine's possible CPUs.
 *
 * Built once, on first use, from /sys/devices/system/cpu/possible and the
 * cache and NUMA topology under /sys/devices/system.  Never freed.
 *
 * It has a slot for every CPU number the kernel can report, so an update
 * never writes outside per-CPU memory: nr_cpus is at least the real
 * possible list's (or, when /sys cannot be read, the width of the kernel's
 * CPU masks, from sched_getaffinity()), the configured CPU count, the
 * highest CPU of the affinity mask and the CPU the caller runs on.
 *
 * Tests only: the environment variable TALLY_SYSFS_ROOT, read at the first
 * call, names a directory laid out like /sys/devices/system (see
 * tally_domain_create_from_sysfs()) whose topology shapes the tree, so that
 * a test can build the system domain of a larger machine.  It can only add
 * slots, never remove them; when it has no cpu/possible the system domain
 * cannot be built.
 *
 * Context: MT-safe (concurrent first callers wait for one build,
 * pthread_once()); not async-signal-safe: the first call allocates and reads
 * /sys with stdio.
 *
 * Return: the domain, or NULL with errno set: ENOENT or EINVAL when
 * TALLY_SYSFS_ROOT has no or a malformed cpu/possible, ERANGE beyond 2^20
 * CPUs, ENOMEM.
 */
struct tally_domain *tally_domain_system(void);

/**
 * tally_domain_create_simulated() - a domain of @nr_cpus simulated CPUs.
 * @out: where the new domain is stored.
 * @nr_cpus: 1 to %TALLY_SIMULATED_MAX_CPUS, any value (not only powers of 2).
 * @grouping: %TALLY_GROUP_LOW_BITS (a simulated domain has no topology of its
 *	own; use tally_domain_create_from_sysfs() for one).
 *
 * Context: MT-safe; not async-signal-safe: allocates and takes the per-CPU pool
 * registry's mutex.
 *
 * Return: 0, -EINVAL for a NULL @out, a CPU count out of range or an unknown
 * grouping, -ENOMEM when out of memory.
 */
int tally_domain_create_simulated(struct tally_domain **out,
				  unsigned int nr_cpus,
				  enum tally_grouping grouping);

/**
 * tally_domain_create_from_sysfs() - a simulated domain shaped like another
 *	machine.
 * @out: where the new domain is stored.
 * @sysfs_root: a directory laid out like /sys/devices/system: it holds
 *	cpu/possible, cpu/cpuN/cache/indexM/{level,type,shared_cpu_list},
 *	cpu/cpuN/topology/{physical_package_id,core_id,cluster_id} and
 *	node/nodeK/cpulist.  Missing topology files are tolerated; a missing
 *	cpu/possible is not.
 * @grouping: how CPUs share tree items.
 *
 * Used to check the topology grouping against fixtures of large machines.
 *
 * Context: MT-safe; not async-signal-safe: allocates, reads files with stdio,
 * takes the per-CPU pool registry's mutex.
 *
 * Return: 0, -EINVAL for NULL arguments, a malformed possible list or more
 * than %TALLY_SIMULATED_MAX_CPUS CPUs, -ENOENT when cpu/possible is missing,
 * -ENOMEM when out of memory.
 */
int tally_domain_create_from_sysfs(struct tally_domain **out,
				   const char *sysfs_root,
				   enum tally_grouping grouping);

/**
 * tally_domain_destroy() - free a simulated domain.
 * @d: a domain from tally_domain_create_*(), or NULL (ignored).  The system
 *	domain is never freed: passing it is ignored.
 *
 * Every per-CPU allocation and counter built on @d must be freed first.
 *
 * Context: MT-safe on distinct domains; not async-signal-safe: takes the
 * per-CPU pool registry's mutex, unmaps and frees memory.
 */
void tally_domain_destroy(struct tally_domain *d);

/**
 * tally_domain_nr_cpus() - number of per-CPU slots of @d (max CPU id + 1).
 *
 * Context: MT-safe, async-signal-safe: reads @d only.
 */
unsigned int tally_domain_nr_cpus(const struct tally_domain *d);

/**
 * tally_domain_is_simulated() - true when updates must name their CPU.
 *
 * Context: MT-safe, async-signal-safe: reads @d only.
 */
bool tally_domain_is_simulated(const struct tally_domain *d);

/**
 * tally_domain_shape() - the tree shape that counters on @d use.
 * @d: the domain.
 * @arity: array of %TALLY_MAX_LEVELS entries, filled with each level's
 *	arity (leaf level first); may be NULL.
 *
 * The top level has 2^ceil(log2(nr_cpus)) / (product of the arities)
 * items, which a counter's approximate sum adds: one root from 17 CPUs
 * up.  Up to 16 CPUs there is one level of at most 8 items: arity 1 (an
 * item per CPU) up to 8 CPUs, arity 2 from 9 to 16, where the two CPUs of
 * an item are neighbours in the topology order under
 * %TALLY_GROUP_TOPOLOGY (SMT siblings on a machine of 2-way SMT), and CPUs
 * c and c + 8 under %TALLY_GROUP_LOW_BITS (siblings on a 16-thread x86
 * machine as Linux numbers them).
 *
 * Context: MT-safe, async-signal-safe: reads @d only.
 *
 * Return: the number of levels above the per-CPU level (1 to
 * %TALLY_MAX_LEVELS).
 */
unsigned int tally_domain_shape(const struct tally_domain *d,
				unsigned int *arity);

/**
 * tally_domain_cpu_position() - the leaf position of @cpu in tree order.
 * @d: the domain.
 * @cpu: a CPU number below tally_domain_nr_cpus().
 *
 * CPUs with close positions share tree items: positions p and q share the
 * level-l item when p >> bits(l) == q >> bits(l), bits(l) being the sum of
 * log2(arity) over levels 1..l.
 *
 * Context: MT-safe, async-signal-safe: reads @d only.
 *
 * Return: the position, or -EINVAL for a CPU out of range.
 */
int tally_domain_cpu_position(const struct tally_domain *d, unsigned int cpu);

/**
 * tally_domain_grouping() - the grouping actually in use on @d.
 *
 * Context: MT-safe, async-signal-safe: reads @d only.
 */
enum tally_grouping tally_domain_grouping(const struct tally_domain *d);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_DOMAIN_H */
