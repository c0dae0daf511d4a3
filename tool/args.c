// SPDX-License-Identifier: MIT
/*
 * args.c - the command line of every command of the tool (args.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

/* The command being parsed and its option being handled, for messages. */
static const struct tool_command *current;
static char current_opt[48];

int tool_usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "tally: %s: ", current ? current->name : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (current)
		current->usage(stderr);
	return -1;
}

int tool_bad_value(const char *arg, const char *expected)
{
	return tool_usage_error("bad value of %s: '%s' (%s)", current_opt, arg,
				expected);
}

/* What is wrong with the long option @text ("--name" or "--name=v"). */
static const char *long_option_fault(const struct option *longopts,
				     const char *text)
{
	const char *name = text + 2;
	size_t len = strcspn(name, "=");
	const struct option *match = NULL;
	unsigned int nr = 0;

	for (const struct option *o = longopts; o->name; o++) {
		if (strncmp(o->name, name, len))
			continue;
		if (strlen(o->name) == len) {
			match = o;
			nr = 1;
			break;
		}
		match = o;
		nr++;
	}
	if (!nr)
		return "unknown";
	if (nr > 1)
		return "ambiguous";
	if (name[len] == '=' && match->has_arg == no_argument)
		return "takes no value";
	return "unknown";
}

/* The name of option @opt (getopt's value, @index its long one or -1). */
static void name_option(const struct tool_command *cmd, int opt, int index)
{
	if (index >= 0)
		snprintf(current_opt, sizeof(current_opt), "--%s",
			 cmd->longopts[index].name);
	else
		snprintf(current_opt, sizeof(current_opt), "-%c", opt);
}

int tool_parse_options(const struct tool_command *cmd, int argc, char **argv,
		       void *ctx, int *operands)
{
	char shorts[32];
	int opt, index;

	current = cmd;
	/* '+': options end at the first operand; ':': a missing value is
	 * told apart from an unknown option. */
	snprintf(shorts, sizeof(shorts), "%s:h%s", cmd->in_order ? "+" : "",
		 cmd->shortopts);
	optind = 0;	/* full reset: the caller may have parsed already */
	opterr = 0;	/* our own messages, naming the command */
	for (;;) {
		index = -1;
		opt = getopt_long(argc, argv, shorts, cmd->longopts, &index);
		if (opt == -1)
			break;
		if (opt == 'h') {
			cmd->usage(stdout);
			return 1;
		}
		if (opt == ':') {
			return tool_usage_error("bad option '%s': needs a value",
						argv[optind - 1]);
		}
		if (opt == '?') {
			const char *text = argv[optind - 1];

			if (!strncmp(text, "--", 2))
				return tool_usage_error(
					"bad option '%s': %s", text,
					long_option_fault(cmd->longopts, text));
			return tool_usage_error("bad option '-%c': unknown",
						optopt);
		}
		name_option(cmd, opt, index);
		if (cmd->option(opt, optarg, ctx))
			return -1;
	}
	current_opt[0] = '\0';
	if (operands)
		*operands = optind;
	else if (optind < argc)
		return tool_usage_error("unexpected argument '%s'",
					argv[optind]);
	return 0;
}

bool tool_parse_number(const char *s, double lo, double hi, double *out)
{
	const char *p = s;
	size_t digits;
	char *end;
	double v;

	/* The grammar, which strtod() alone would widen (sign, spaces,
	 * hexadecimal, inf, nan). */
	digits = strspn(p, "0123456789");
	p += digits;
	if (*p == '.') {
		size_t frac = strspn(p + 1, "0123456789");

		digits += frac;
		p += 1 + frac;
	}
	if (!digits)
		return false;
	if (*p == 'e' || *p == 'E') {
		p++;
		p += *p == '+' || *p == '-';
		if (!strspn(p, "0123456789"))
			return false;
		p += strspn(p, "0123456789");
	}
	if (*p)
		return false;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v >= lo && v <= hi))
		return false;
	*out = v;
	return true;
}

/* @s: digits only, a value in [@lo, @hi]. */
static bool parse_uint(const char *s, unsigned long lo, unsigned long hi,
		       unsigned long *out, char **rest)
{
	unsigned long v;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoul(s, rest, 10);
	if (errno || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

int tool_opt_uint(const char *arg, unsigned long lo, unsigned long hi,
		  unsigned long *out)
{
	char expected[80], *end;
	unsigned long v;

	if (parse_uint(arg, lo, hi, &v, &end) && !*end) {
		*out = v;
		return 0;
	}
	snprintf(expected, sizeof(expected), "a whole number from %lu to %lu",
		 lo, hi);
	return tool_bad_value(arg, expected);
}

int tool_opt_list(const char *arg, unsigned int *out, unsigned int max,
		  unsigned int lo, unsigned int hi, unsigned int *nr)
{
	const char *s = arg;
	char expected[96], *end;
	unsigned int n = 0;

	for (;;) {
		unsigned long v;

		if (n == max || !parse_uint(s, lo, hi, &v, &end))
			break;
		out[n++] = (unsigned int)v;
		if (!*end) {
			*nr = n;
			return 0;
		}
		if (*end != ',')
			break;
		s = end + 1;
	}
	if (max == 1)
		snprintf(expected, sizeof(expected),
			 "a whole number from %u to %u", lo, hi);
	else
		snprintf(expected, sizeof(expected),
			 "1 to %u comma-separated numbers from %u to %u", max,
			 lo, hi);
	return tool_bad_value(arg, expected);
}

/* Index of the name @s (@len bytes) among @names, or @nr. */
static unsigned int find_name(const char *s, size_t len,
			      const char *const *names, unsigned int nr)
{
	unsigned int i = 0;

	while (i < nr && (strlen(names[i]) != len || strncmp(s, names[i], len)))
		i++;
	return i;
}

/* tool_bad_value() with "@what: NAME, NAME, ..." as what is expected. */
static int bad_name(const char *arg, const char *what,
		    const char *const *names, unsigned int nr)
{
	char expected[256];
	size_t len = (size_t)snprintf(expected, sizeof(expected), "%s: ", what);

	for (unsigned int i = 0; i < nr && len < sizeof(expected); i++)
		len += (size_t)snprintf(expected + len, sizeof(expected) - len,
					"%s%s", i ? ", " : "", names[i]);
	return tool_bad_value(arg, expected);
}

int tool_opt_names(const char *arg, const char *const *names,
		   unsigned int nr, unsigned int *mask)
{
	unsigned int found = 0;
	const char *s = arg;

	for (;;) {
		size_t len = strcspn(s, ",");
		unsigned int i = find_name(s, len, names, nr);

		if (i == nr)
			return bad_name(arg, "a comma-separated list of", names,
					nr);
		found |= 1u << i;
		if (!s[len])
			break;
		s += len + 1;
	}
	*mask = found;
	return 0;
}

int tool_opt_choice(const char *arg, const char *const *names,
		    unsigned int nr, unsigned int *index)
{
	unsigned int i = find_name(arg, strlen(arg), names, nr);

	if (i == nr)
		return bad_name(arg, "one of", names, nr);
	*index = i;
	return 0;
}

int tool_opt_number(const char *arg, double lo, double hi, const char *unit,
		    double *out)
{
	char expected[96];

	if (tool_parse_number(arg, lo, hi, out))
		return 0;
	if (unit)
		snprintf(expected, sizeof(expected),
			 "a number of %s from %g to %g", unit, lo, hi);
	else
		snprintf(expected, sizeof(expected), "a number from %g to %g",
			 lo, hi);
	return tool_bad_value(arg, expected);
}
