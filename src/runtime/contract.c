// SPDX-License-Identifier: MIT
/*
 * contract.c - stopping on a broken contract (contract.h).  write(), not
 * stdio: the functions that call it are async-signal-safe.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "contract.h"

static void put(const char *s)
{
	if (write(STDERR_FILENO, s, strlen(s)) < 0)
		abort();
}

void contract_null_abort(const char *fn, const char *what)
{
	put("tally: ");
	put(fn);
	put("() called with a NULL ");
	put(what);
	put("\n");
	abort();
}
