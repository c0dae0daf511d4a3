/* SPDX-License-Identifier: MIT */
#ifndef TALLY_CLI_JSON_READ_H
#define TALLY_CLI_JSON_READ_H

/*
 * json_read.h - a small JSON reader for `tally plot`: parses a whole
 * document (RFC 8259) into a tree of values.  Hostile input gets an error
 * message with its byte offset, never a crash: nesting is limited to
 * JSON_READ_DEPTH, strings must be valid UTF-8 with valid escapes
 * ("\uXXXX" pairs become UTF-8), numbers follow the JSON grammar.
 */

#include <stdbool.h>
#include <stddef.h>

/** Deepest nesting accepted. */
#define JSON_READ_DEPTH 64

enum json_type {
	JSON_NULL,
	JSON_BOOL,
	JSON_NUMBER,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

/**
 * struct json_value - one parsed value.
 * @type: which of the fields below holds it.
 * @boolean: a JSON_BOOL's value.
 * @number: a JSON_NUMBER's value.
 * @string: a JSON_STRING's value, NUL-terminated (may hold "\u0000" as a
 *	NUL: then only its prefix is seen).
 * @n: members of an object or elements of an array.
 * @keys: an object's member names (@n of them).
 * @items: an array's elements or an object's member values (@n).
 */
struct json_value {
	enum json_type type;
	bool boolean;
	double number;
	char *string;
	size_t n;
	char **keys;
	struct json_value *items;
};

/**
 * json_parse() - parse a document.
 * @text: the document, NUL-terminated.
 * @len: its length: a NUL byte before it is an error ("a NUL byte").
 * @out: set to the root value (free with json_free()).
 * @err: receives a message on failure ("at byte 12: expected ':'").
 * @errlen: size of @err.
 *
 * Return: 0, or -1 for malformed input or no memory (@err says which).
 */
int json_parse(const char *text, size_t len, struct json_value **out,
	       char *err, size_t errlen);

/** json_free() - free a tree from json_parse(); NULL is ignored. */
void json_free(struct json_value *v);

/**
 * json_get() - the member @key of an object.
 * @v: a value (anything but an object gives NULL).
 * @key: the member name.
 *
 * Return: the first member of that name, or NULL.
 */
const struct json_value *json_get(const struct json_value *v,
				  const char *key);

#endif /* TALLY_CLI_JSON_READ_H */
