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

int bench_bad_value(const char *cmd, const char *opt, const char *arg,
		    void (*usage)(FILE *f))
{
	char what[64];

	snprintf(what, sizeof(what), "bad value of %s", opt);
	return bench_bad_usage(cmd, what, arg, usage);
}

int bench_parse_options(int argc, char **argv, const char *cmd,
			const char *shortopts, const struct option *longopts,
			void (*usage)(FILE *f),
			int (*option)(int opt, char *arg, void *ctx),
			void *ctx)
{
	char shorts[32];
	int opt;

	snprintf(shorts, sizeof(shorts), "h%s", shortopts);
	optind = 0;	/* full reset: the caller may have parsed already */
	opterr = 0;	/* our own message, naming the whole command */
	while ((opt = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
		if (opt == 'h') {
			usage(stdout);
			return 1;
		}
		if (opt == '?' || opt == ':')
			return bench_bad_usage(cmd,
					       "bad option or missing value",
					       argv[optind - 1], usage);
		if (option(opt, optarg, ctx))
			return -1;
	}
	if (optind < argc)
		return bench_bad_usage(cmd, "unexpected argument",
				       argv[optind], usage);
	return 0;
}
