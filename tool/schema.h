/* SPDX-License-Identifier: MIT */
#ifndef TALLY_TOOL_SCHEMA_H
#define TALLY_TOOL_SCHEMA_H

/*
 * schema.h - the contract between `tally bench`, which writes the
 * benchmarks' JSON, and `tally plot`, which reads it.
 */

/**
 * TOOL_BENCH_JSON_SCHEMA - the version of the benchmarks' JSON layout (its
 *	member "schema_version"): raised when a member is renamed, removed or
 *	changes meaning (not when one is added), so that a reader can refuse
 *	a layout it does not know.
 */
#define TOOL_BENCH_JSON_SCHEMA 1

#endif /* TALLY_TOOL_SCHEMA_H */
