/* SPDX-License-Identifier: MIT */
#ifndef TALLY_VERSION_H
#define TALLY_VERSION_H

/*
 * tally/version.h - the version of tally: the macros give the headers'
 * version at compile time, tally_version() the library's at run time (a
 * program built against one release may run with a newer shared library
 * of the same soname).  The Makefile reads its version from this file.
 */

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_VERSION_MAJOR 0
#define TALLY_VERSION_MINOR 1
#define TALLY_VERSION_PATCH 0

#define TALLY_VERSION_STR_(x) #x
#define TALLY_VERSION_STR(x) TALLY_VERSION_STR_(x)
/** The headers' version as text: "MAJOR.MINOR.PATCH". */
#define TALLY_VERSION_STRING						\
	TALLY_VERSION_STR(TALLY_VERSION_MAJOR) "."			\
	TALLY_VERSION_STR(TALLY_VERSION_MINOR) "."			\
	TALLY_VERSION_STR(TALLY_VERSION_PATCH)
/** The headers' version as one number, for #if: 0.1.0 is 100. */
#define TALLY_VERSION_NUMBER						\
	(TALLY_VERSION_MAJOR * 10000 + TALLY_VERSION_MINOR * 100 +	\
	 TALLY_VERSION_PATCH)

/**
 * tally_version() - the version of the library linked at run time.
 *
 * Context: MT-safe, async-signal-safe: returns a constant.
 *
 * Return: "MAJOR.MINOR.PATCH", a static string.
 */
const char *tally_version(void);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_VERSION_H */
