/* SPDX-License-Identifier: MIT */
#ifndef TALLY_TESTS_FUZZ_H
#define TALLY_TESTS_FUZZ_H

/*
 * fuzz.h - what the libFuzzer harnesses of tests/fuzz share: the entry
 * point libFuzzer calls, and a property check that stays on in every
 * build (assert() would vanish under NDEBUG) and names the property.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)							\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "%s:%d: property broken: %s\n",	\
				__FILE__, __LINE__, #cond);		\
			abort();					\
		}							\
	} while (0)

#endif /* TALLY_TESTS_FUZZ_H */
