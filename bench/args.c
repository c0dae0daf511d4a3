// SPDX-License-Identifier: MIT
/*
 * args.c - command-line helpers of the benchmarks (args.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

int bench_parse_list(const char *s, unsigned int *out, unsigned int max,
		     unsigned int lo, unsigned int hi)
{
	unsigned int nr = 0;

	for (;;) {
		char *end;
		unsigned long v;

		if (*s < '0' || *s > '9')
			return -1;
		errno = 0;
		v = strtoul(s, &end, 10);
		if (errno || v < lo || v > hi || nr == max)
			return -1;
		out[nr++] = (unsigned int)v;
		if (!*end)
			return (int)nr;
		if (*end != ',')
			return -1;
		s = end + 1;
	}
}

int bench_parse_names(const char *s, const char *const *names,
		      unsigned int nr, unsigned int *mask)
{
	unsigned int found = 0;

	for (;;) {
		size_t len = strcspn(s, ",");
		unsigned int i = 0;

		while (i < nr && (strlen(names[i]) != len ||
				  strncmp(s, names[i], len)))
			i++;
		if (i == nr)
			return -1;
		found |= 1u << i;
		if (!s[len])
			break;
		s += len + 1;
	}
	*mask = found;
	return 0;
}

int bench_bad_usage(const char *cmd, const char *what, const char *arg,
		    void (*usage)(FILE *f))
{
	/* Every message of the tool starts "tally: " ("tally: bench stats: "). */
	if (!strncmp(cmd, "tally ", 6))
		cmd += 6;
	fprintf(stderr, "tally: %s: %s: '%s'\n", cmd, what, arg);
	usage(stderr);
	return -1;
}
