// SPDX-License-Identifier: MIT
/*
 * version.c - the library's version at run time (tally/version.h): the
 * headers' version when the library was built.
 */
#include <tally/version.h>

const char *tally_version(void)
{
	return TALLY_VERSION_STRING;
}
