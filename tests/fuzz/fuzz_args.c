// SPDX-License-Identifier: MIT
/*
 * fuzz_args.c - the tool's option parser (tool/args.c) on any command
 * line: the input split at NUL bytes into arguments, parsed for a command
 * that has a flag, a number, a whole number, a list, a set of names and a
 * choice, each as a long and a short option.  Properties: a value given
 * to the handler is what the option accepts (in range, digits only for
 * whole numbers, the grammar of tool_parse_number() for numbers); a
 * refusal returns -1 with one message on standard error that starts
 * "tally: fuzz: " and names what is wrong; -h/--help returns 1 with the
 * usage on standard output; else 0, the operands after the options.
 */
#include <regex.h>
#include <string.h>

#include "args.h"
#include "fuzz.h"

static const char *const choices[] = { "usage", "name", "size" };

static void usage(FILE *f)
{
	fputs("usage: fuzz\n", f);
}

/* The grammar of tool_parse_number(), as a regular expression. */
static bool number_grammar(const char *s)
{
	static regex_t re;
	static bool compiled;

	if (!compiled) {
		CHECK(!regcomp(&re, "^([0-9]+[.]?[0-9]*|[.][0-9]+)"
			       "([eE][+-]?[0-9]+)?$", REG_EXTENDED | REG_NOSUB));
		compiled = true;
	}
	return !regexec(&re, s, 0, NULL, 0);
}

static int option(int opt, char *arg, void *ctx)
{
	unsigned long u = 7;
	unsigned int list[4], nr = 99, mask = 1u << 31, idx = 99;
	double d = -1;
	int r = 0;

	(void)ctx;
	switch (opt) {
	case 'f':
		CHECK(!arg);
		break;
	case 'n':
		r = tool_opt_number(arg, 0.1, 3600, "seconds", &d);
		CHECK(r ? d == -1 : d >= 0.1 && d <= 3600 &&
			  number_grammar(arg));
		break;
	case 'u':
		r = tool_opt_uint(arg, 2, 1000, &u);
		CHECK(r ? u == 7 : u >= 2 && u <= 1000 &&
			  strspn(arg, "0123456789") == strlen(arg));
		break;
	case 'l':
		r = tool_opt_list(arg, list, 4, 1, 64, &nr);
		if (r) {
			CHECK(nr == 99);
		} else {
			CHECK(nr >= 1 && nr <= 4);
			for (unsigned int i = 0; i < nr; i++)
				CHECK(list[i] >= 1 && list[i] <= 64);
			CHECK(strspn(arg, "0123456789,") == strlen(arg));
		}
		break;
	case 'm':
		r = tool_opt_names(arg, choices, 3, &mask);
		CHECK(r ? mask == 1u << 31 : mask && mask < 8);
		break;
	case 'c':
		r = tool_opt_choice(arg, choices, 3, &idx);
		CHECK(r ? idx == 99 : idx < 3 && !strcmp(arg, choices[idx]));
		break;
	default:
		CHECK(!"an option the command does not have");
	}
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct option longopts[] = {
		{ "flag", no_argument, NULL, 'f' },
		{ "number", required_argument, NULL, 'n' },
		{ "uint", required_argument, NULL, 'u' },
		{ "list", required_argument, NULL, 'l' },
		{ "names", required_argument, NULL, 'm' },
		{ "choice", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct tool_command cmd = {
		"fuzz", usage, "fn:u:l:m:c:", longopts, option, false
	};
	static char prog[] = "fuzz";
	char *copy = malloc(size + 1), *argv[66], *err = NULL, *out = NULL;
	size_t err_len = 0, out_len = 0;
	FILE *saved_err = stderr, *saved_out = stdout;
	int argc = 1, first = -1, r;

	CHECK(copy);
	memcpy(copy, data, size);
	copy[size] = '\0';
	argv[0] = prog;
	for (char *p = copy; p < copy + size && argc < 65; p += strlen(p) + 1)
		argv[argc++] = p;
	argv[argc] = NULL;
	stderr = open_memstream(&err, &err_len);
	stdout = open_memstream(&out, &out_len);
	CHECK(stderr && stdout);
	r = tool_parse_options(&cmd, argc, argv, NULL, &first);
	fclose(stderr);
	fclose(stdout);
	stderr = saved_err;
	stdout = saved_out;
	if (r < 0) {
		CHECK(!strncmp(err, "tally: fuzz: ", 13));
		CHECK(strstr(err, "bad value of ") || strstr(err, "bad option '"));
		CHECK(strstr(err, "\nusage: fuzz\n"));
	} else if (r == 1) {
		CHECK(!strcmp(out, "usage: fuzz\n") && !err_len);
	} else {
		CHECK(r == 0 && !err_len && !out_len);
		CHECK(first >= 1 && first <= argc);
	}
	free(err);
	free(out);
	free(copy);
	return 0;
}
