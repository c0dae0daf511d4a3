/* SPDX-License-Identifier: MIT */
#ifndef TALLY_TOOL_MACHINE_H
#define TALLY_TOOL_MACHINE_H

/*
 * machine.h - what the tool says about the machine it runs on, in the
 * same words in `tally info` and in the machine line and JSON of every
 * benchmark (bench/machine.h).
 */

/**
 * tool_rseq_mode_name() - how tally updates per-CPU data in this process.
 *
 * Context: any; the first call may register rseq (tally_rseq_mode()).
 * Return: "glibc" (glibc's rseq registration), "own" (tally's) or
 * "fallback" (atomic adds on sched_getcpu()'s slot).
 */
const char *tool_rseq_mode_name(void);

#endif /* TALLY_TOOL_MACHINE_H */
