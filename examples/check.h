/* SPDX-License-Identifier: MIT */
#ifndef TALLY_EXAMPLE_CHECK_H
#define TALLY_EXAMPLE_CHECK_H

/*
 * check.h - error handling of the examples.  tally's calls return 0 (or a
 * length, a count) on success and a negative errno on failure:
 * CHECK(call) prints the failed call with its error and exits.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call) check_result((call), #call)

static inline long check_result(long ret, const char *call)
{
	if (ret >= 0)
		return ret;
	fprintf(stderr, "%s failed: %s\n", call, strerror((int)-ret));
	if (ret == -ENODEV)
		fputs("(is /sys/devices/system/cpu readable?)\n", stderr);
	exit(EXIT_FAILURE);
}

#endif /* TALLY_EXAMPLE_CHECK_H */
