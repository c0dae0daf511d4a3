// SPDX-License-Identifier: MIT
/*
 * machine.c - what the tool says about the machine (machine.h).
 */
#include <tally/percpu.h>

#include "machine.h"

const char *tool_rseq_mode_name(void)
{
	switch (tally_rseq_mode()) {
	case TALLY_RSEQ_GLIBC:
		return "glibc";
	case TALLY_RSEQ_OWN:
		return "own";
	case TALLY_RSEQ_FALLBACK:
		return "fallback";
	}
	return "unknown";
}
