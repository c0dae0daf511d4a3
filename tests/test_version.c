// SPDX-License-Identifier: MIT
/*
 * test_version.c - tally/version.h: the run-time version is the headers',
 * and the macros agree with each other.
 */
#include <stdio.h>
#include <string.h>

#include <tally/version.h>

#include "harness.h"

TEST(run_time_version_is_the_headers_version)
{
	CHECK(!strcmp(tally_version(), TALLY_VERSION_STRING));
}

TEST(version_string_and_number_come_from_the_three_macros)
{
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", TALLY_VERSION_MAJOR,
		 TALLY_VERSION_MINOR, TALLY_VERSION_PATCH);
	CHECK(!strcmp(TALLY_VERSION_STRING, want));
	CHECK_EQ_LONG(TALLY_VERSION_NUMBER,
		      TALLY_VERSION_MAJOR * 10000 + TALLY_VERSION_MINOR * 100 +
			      TALLY_VERSION_PATCH);
#if TALLY_VERSION_NUMBER < 100
	CHECK(!"TALLY_VERSION_NUMBER is usable in #if and at least 0.1.0");
#endif
}
