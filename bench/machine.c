// SPDX-License-Identifier: MIT
/*
 * machine.c - the machine description (machine.h).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <tally/domain.h>
#include <tally/version.h>

#include "../tool/machine.h"
#include "../tool/schema.h"
#include "machine.h"

static void read_cpu_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[256];

	snprintf(buf, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) || !colon)
			continue;
		colon += 1 + strspn(colon + 1, " \t");
		colon[strcspn(colon, "\n")] = '\0';
		snprintf(buf, len, "%s", colon);
		break;
	}
	fclose(f);
}

void bench_machine_get(struct bench_machine *m)
{
	struct tally_domain *d = tally_domain_system();
	struct utsname u;
	long online = sysconf(_SC_NPROCESSORS_ONLN);

	read_cpu_model(m->cpu_model, sizeof(m->cpu_model));
	m->possible_cpus = d ? tally_domain_nr_cpus(d) : 0;
	m->online_cpus = online > 0 ? (unsigned int)online : 0;
	if (uname(&u) == 0)
		snprintf(m->kernel, sizeof(m->kernel), "%s %s", u.sysname,
			 u.release);
	else
		snprintf(m->kernel, sizeof(m->kernel), "unknown");
	m->rseq = tool_rseq_mode_name();
	if (getloadavg(&m->loadavg, 1) != 1)
		m->loadavg = -1;
#if defined(__clang__)
	m->compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
	m->compiler = "gcc " __VERSION__;
#else
	m->compiler = "unknown";
#endif
}

void bench_machine_print(FILE *f, const struct bench_machine *m)
{
	fprintf(f,
		"machine: %s, %u possible CPUs (%u online), %s, rseq %s, %s, load %.2f\n",
		m->cpu_model, m->possible_cpus, m->online_cpus, m->kernel,
		m->rseq, m->compiler, m->loadavg);
}

void bench_machine_json(struct bench_json *w, const struct bench_machine *m)
{
	bench_json_begin(w, "machine", '{', false);
	bench_json_string(w, "cpu_model", m->cpu_model);
	bench_json_int(w, "possible_cpus", m->possible_cpus);
	bench_json_int(w, "online_cpus", m->online_cpus);
	bench_json_string(w, "kernel", m->kernel);
	bench_json_string(w, "rseq", m->rseq);
	bench_json_string(w, "compiler", m->compiler);
	bench_json_double(w, "loadavg_1min", m->loadavg);
	bench_json_end(w);
}

void bench_json_load_end(struct bench_json *w)
{
	double load;

	if (!w->f)
		return;
	while (w->depth > 1)
		bench_json_end(w);
	if (getloadavg(&load, 1) != 1)
		load = -1;
	bench_json_double(w, "loadavg_1min_end", load);
}

void bench_json_identity(struct bench_json *w, const char *name)
{
	bench_json_string(w, "benchmark", name);
	bench_json_string(w, "tally_version", tally_version());
	bench_json_int(w, "schema_version", TOOL_BENCH_JSON_SCHEMA);
}

long bench_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			kib = strtol(line + 6, NULL, 10);
	fclose(f);
	return kib;
}
