/* SPDX-License-Identifier: MIT */
#ifndef TALLY_CONTRACT_H
#define TALLY_CONTRACT_H

/*
 * contract.h - the end of functions whose result cannot carry an error
 * code (a sum, a count, a compare's sign): a NULL argument breaks their
 * documented contract, and they stop the process with a message naming
 * the function, in every build, rather than fault or answer a wrong value.
 */

/*
 * Write "tally: FN() called with a NULL WHAT" to stderr with write() (so
 * that it may run in a signal handler) and abort().
 */
__attribute__((noreturn, cold)) void contract_null_abort(const char *fn,
							  const char *what);

#endif /* TALLY_CONTRACT_H */
