/* SPDX-License-Identifier: MIT */
#ifndef TALLY_CLI_PLOT_H
#define TALLY_CLI_PLOT_H

/**
 * tally_plot() - `tally plot RESULT.json [-o DIR]`: gnuplot pictures of a
 *	benchmark's JSON, with their data, scripts and an index.
 * @argc: argument count, including argv[0] ("plot").
 * @argv: the arguments.
 *
 * Return: the exit status: 0 done, 1 a file or gnuplot failed, 2 bad usage
 * or input, 3 gnuplot missing (data and scripts written).
 */
int tally_plot(int argc, char **argv);

#endif /* TALLY_CLI_PLOT_H */
