// SPDX-License-Identifier: MIT
/*
 * bench_malloc_jemalloc.c - how `tally bench malloc` gets jemalloc beside
 * glibc's malloc.
 *
 * jemalloc and glibc cannot both be the malloc of one process.  The tool
 * keeps glibc's, and loads jemalloc (with libtally_jemalloc and a second
 * libtally, found beside the tool) with dlopen(RTLD_LOCAL): their symbols
 * stay out of the global scope, so nothing else binds to jemalloc's
 * malloc, and the rows call jemalloc through mallocx()/dallocx() (names
 * glibc does not define) found with dlsym() on that handle.  Debian's
 * jemalloc is built with initial-exec TLS, which a dlopen() can place only
 * in glibc's static TLS surplus: when the default surplus is too small
 * the benchmark runs itself again with
 * GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_malloc.h"

#define TLS_TUNABLE "glibc.rtld.optional_static_tls=65536"

struct bench_jemalloc je;

static void *sym(void *h, const char *name, bool *ok)
{
	void *p = dlsym(h, name);

	if (!p) {
		fprintf(stderr, "tally: %s: %s\n", CMD, dlerror());
		*ok = false;
	}
	return p;
}

/* Run the tool again with a larger static TLS surplus (see the top). */
static void rerun_with_tls(int argc, char **argv)
{
	const char *old = getenv("GLIBC_TUNABLES");
	char *tun = malloc((old ? strlen(old) : 0) + sizeof(TLS_TUNABLE) + 1);
	char **args = calloc((size_t)argc + 3, sizeof(char *));

	if (!tun || !args || (old && strstr(old, TLS_TUNABLE)))
		return;		/* already tried: let the caller fail */
	sprintf(tun, "%s%s%s", old ? old : "", old && *old ? ":" : "",
		TLS_TUNABLE);
	setenv("GLIBC_TUNABLES", tun, 1);
	args[0] = (char *)"tally";
	args[1] = (char *)"bench";
	for (int i = 0; i < argc; i++)
		args[i + 2] = argv[i];
	fflush(NULL);
	execv("/proc/self/exe", args);
}

int load_jemalloc(int argc, char **argv)
{
	char exe[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	void *h = NULL;
	bool ok = true;

	if (n > 0) {
		exe[n] = 0;
		char *slash = strrchr(exe, '/');

		if (slash) {
			*slash = 0;
			snprintf(path, sizeof(path), "%s/libtally_jemalloc.so",
				 exe);
			h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		}
	}
	if (!h) {
		const char *e = dlerror();

		if (e && strstr(e, "static TLS"))
			rerun_with_tls(argc, argv);
		h = dlopen(TALLY_LIBDIR "/libtally_jemalloc.so",
			   RTLD_NOW | RTLD_LOCAL);
	}
	if (!h) {
		const char *e = dlerror();

		if (e && strstr(e, "static TLS"))
			rerun_with_tls(argc, argv);
		fprintf(stderr, "tally: %s: cannot load libtally_jemalloc.so: "
			"%s\n", CMD, e ? e : "not found");
		return -1;
	}
	je.mallocx = (void *(*)(size_t, int))sym(h, "mallocx", &ok);
	je.dallocx = (void (*)(void *, int))sym(h, "dallocx", &ok);
	*(void **)&je.tree_create = sym(h, "tally_memcg_tree_create", &ok);
	*(void **)&je.root = sym(h, "tally_memcg_root", &ok);
	*(void **)&je.create = sym(h, "tally_memcg_create", &ok);
	*(void **)&je.usage = sym(h, "tally_memcg_usage", &ok);
	*(void **)&je.init = sym(h, "tally_jemalloc_init", &ok);
	*(void **)&je.set_current = sym(h, "tally_jemalloc_set_current", &ok);
	*(void **)&je.stats = sym(h, "tally_jemalloc_stats", &ok);
	*(void **)&je.flush = sym(h, "tally_jemalloc_flush", &ok);
	*(void **)&je.purge = sym(h, "tally_jemalloc_purge", &ok);
	return ok ? 0 : -1;
}
