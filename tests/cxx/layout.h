/* SPDX-License-Identifier: MIT */
#ifndef TALLY_TESTS_CXX_LAYOUT_H
#define TALLY_TESTS_CXX_LAYOUT_H

/*
 * layout.h - every struct and enum that include/tally/ defines, for
 * test_cxx.cc to compare their size and alignment as C++ sees them with
 * what the C compiler gave layout.c: a C++ program shares these types with
 * a library compiled as C.  scripts/check-cxx.sh fails when a header
 * defines one that is not listed here.
 */

#include <stddef.h>
#include <tally/counter.h>
#include <tally/domain.h>
#include <tally/export.h>
#include <tally/export_http.h>
#include <tally/jemalloc.h>
#include <tally/memcg.h>
#include <tally/memcg_current.h>
#include <tally/mm.h>
#include <tally/oom.h>
#include <tally/percpu.h>
#include <tally/stats.h>
#include <tally/version.h>

#define LAYOUT_TYPES(X)							\
	X(struct tally_counter_item) X(struct tally_counter)		\
	X(struct tally_export_label) X(struct tally_export_options)	\
	X(struct tally_export_stats_options)				\
	X(struct tally_export_memcg_options)				\
	X(struct tally_http_options) X(struct tally_jemalloc_options)	\
	X(struct tally_jemalloc_stats) X(struct tally_memcg_options)	\
	X(struct tally_memcg_limits) X(struct tally_memcg_range)	\
	X(struct tally_memcg_throttle) X(struct tally_memcg_oom_policy)	\
	X(struct tally_memcg_task) X(struct tally_memcg_info)		\
	X(struct tally_memcg_fast_) X(struct tally_mm)			\
	X(struct tally_mm_range) X(struct tally_oom_candidate)		\
	X(struct tally_oom_options) X(struct tally_oom_result)		\
	X(struct tally_stat_desc) X(struct tally_stats_options)		\
	X(struct tally_stats_info)					\
	X(enum tally_grouping) X(enum tally_export_format)		\
	X(enum tally_memcg_stat) X(enum tally_memcg_event)		\
	X(enum tally_memcg_limit) X(enum tally_memcg_read_mode)		\
	X(enum tally_memcg_oom_mode) X(enum tally_memcg_file)		\
	X(enum tally_mm_item) X(enum tally_oom_method)			\
	X(enum tally_rseq_mode) X(enum tally_stat_kind)			\
	X(enum tally_flush_mode)

#ifdef __cplusplus
extern "C" {
#endif

/* As the C compiler lays them out, in LAYOUT_TYPES' order. */
extern const size_t layout_c_size[];
extern const size_t layout_c_align[];

#ifdef __cplusplus
}
#endif

#endif /* TALLY_TESTS_CXX_LAYOUT_H */
