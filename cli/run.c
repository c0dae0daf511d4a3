// SPDX-License-Identifier: MIT
/*
 * run.c - `tally run`: run a program with every allocation of its process
 * charged to one memory group, under the limits of the command line.
 *
 * The program is executed directly (execvp(), never through a shell) in a
 * child whose environment preloads jemalloc and libtally_run.so
 * (src/jemalloc/run_preload.c), which installs the accounting before the
 * program's main() and tells this process through a pipe that it did.
 * This process waits, forwarding SIGINT, SIGTERM, SIGHUP and SIGQUIT,
 * and exits with the program's status.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <tally/memcg.h>

#include "../tool/args.h"
#include "cli.h"

/* Exit statuses of tally run besides the program's (as env(1) has them). */
#define RUN_EXIT_FAILED 125	/* tally itself failed */
#define RUN_EXIT_CANNOT 126	/* the program cannot be run */
#define RUN_EXIT_MISSING 127	/* the program was not found */

#ifndef TALLY_LIBDIR
#define TALLY_LIBDIR "/usr/local/lib"
#endif
#define JEMALLOC_SO "libjemalloc.so.2"
#define PRELOAD_SO "libtally_run.so"

static void run_usage(FILE *f)
{
	fprintf(f,
"usage: tally run [--memory-max SIZE] [--memory-high SIZE] [--metrics FILE]\n"
"                 [--interval S] [--] PROGRAM [ARGS...]\n"
"\n"
"Run PROGRAM (searched in PATH, executed directly, never through a shell)\n"
"with jemalloc and tally preloaded: every allocation of its process through\n"
"malloc, calloc, realloc, posix_memalign, C++ new... is charged to one memory\n"
"group, a page at a time (jemalloc's active and dirty pages).\n"
"\n"
"  --memory-max SIZE   the group's max: an allocation that does not fit\n"
"                      fails (NULL, errno ENOMEM), and the program handles\n"
"                      it as it handles any out-of-memory error\n"
"  --memory-high SIZE  the group's high (events, no failure)\n"
"  --metrics FILE      write the group's memory files (usage, peak, limits,\n"
"                      events, memory.stat) and the process's jemalloc and\n"
"                      RSS figures as a Prometheus textfile, replaced\n"
"                      atomically as the program starts, every interval\n"
"                      and at exit (not after _exit() or a signal: the\n"
"                      last write stays)\n"
"  --interval S        seconds between two writes (default 10; 0.001 to\n"
"                      86400, decimals allowed)\n"
"\n"
"SIZE is a number of bytes with an optional binary suffix K, M, G or T\n"
"(KiB, MiB, GiB, TiB; 'k', 'KiB', 'KB' alike), or 'max' for no limit.\n"
"\n"
"What it cannot see: memory not allocated through malloc: the program's own\n"
"mmap() calls, thread stacks, its code and static data, the kernel's\n"
"buffers; allocators of its own that take big blocks from malloc count as\n"
"those blocks (Python's small-object allocator takes its arenas with mmap:\n"
"run with PYTHONMALLOC=malloc to see every object).  Each process is\n"
"accounted on its own: programs it starts inherit the preload and are\n"
"accounted with the same limits in their own process; a forked child starts\n"
"with its copy of the parent's usage.  Only the process tally run started\n"
"writes the metrics file.  Statically linked programs cannot be run (the\n"
"preload needs the dynamic loader), nor set-user-ID or set-group-ID ones\n"
"(the loader ignores the preload for them).\n"
"\n"
"Exit status: the program's, or 128+N when signal N killed it; %d bad\n"
"command line (unparseable size or interval, no program); %d tally failed\n"
"(the preload library or jemalloc missing, the accounting could not be\n"
"installed); %d the program cannot be run (not executable, statically\n"
"linked, set-user-ID); %d the program was not found.\n",
		CLI_EXIT_USAGE, RUN_EXIT_FAILED, RUN_EXIT_CANNOT,
		RUN_EXIT_MISSING);
}

/*
 * Parse SIZE into *@out: digits, then an optional suffix; "max" is
 * unlimited.  Returns false for anything else, 0 included is fine.
 */
static bool parse_size(const char *s, long *out)
{
	static const char units[] = "KMGT";
	unsigned long long v = 0;
	const char *p = s;
	int shift = 0;

	if (!strcmp(s, "max")) {
		*out = TALLY_MEMCG_UNLIMITED;
		return true;
	}
	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (unsigned long long)LONG_MAX / 10)
			return false;
		v = v * 10 + (unsigned long long)(*p - '0');
	}
	if (*p) {
		const char *u = strchr(units, *p >= 'a' ? *p - 'a' + 'A' : *p);

		if (!u || !*u)
			return false;
		shift = 10 * (int)(u - units + 1);
		p++;
		if (!strcmp(p, "iB") || !strcmp(p, "B"))
			p += strlen(p);
		if (*p)
			return false;
	}
	if (v > ((unsigned long long)LONG_MAX >> shift))
		return false;
	*out = (long)(v << shift);
	return true;
}

/* The command line of tally run. */
struct run_args {
	long max, high;
	long interval_ms;
	const char *metrics;
};

static int run_option(int opt, char *arg, void *ctx)
{
	struct run_args *a = ctx;
	double seconds;

	switch (opt) {
	case 'x':
	case 'H':
		if (!parse_size(arg, opt == 'x' ? &a->max : &a->high))
			return tool_usage_error("%s: cannot parse size '%s' "
						"(bytes, with an optional K, M, "
						"G or T suffix, or 'max')",
						opt == 'x' ? "--memory-max"
							   : "--memory-high",
						arg);
		break;
	case 'm':
		if (!*arg)
			return tool_bad_value(arg, "a file name");
		a->metrics = arg;
		break;
	case 'i':
		if (!tool_parse_number(arg, 0.001, 86400, &seconds))
			return tool_usage_error("--interval: '%s' is not a "
						"number of seconds from 0.001 "
						"to 86400", arg);
		a->interval_ms = (long)(seconds * 1000 + 0.5);
		break;
	}
	return 0;
}

/* The executable execvp() would run for @prog into @buf, or an errno. */
static int resolve(const char *prog, char *buf, size_t len)
{
	const char *path = getenv("PATH");
	int err = ENOENT;

	if (strchr(prog, '/')) {
		if (snprintf(buf, len, "%s", prog) >= (int)len)
			return ENAMETOOLONG;
		return access(buf, X_OK) ? errno : 0;
	}
	if (!path)
		path = "/bin:/usr/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		struct stat st;

		if (snprintf(buf, len, "%.*s%s%s", (int)n, n ? path : ".",
			     "/", prog) < (int)len &&
		    !stat(buf, &st) && S_ISREG(st.st_mode)) {
			if (!access(buf, X_OK))
				return 0;
			err = EACCES;
		}
		path += n + (path[n] == ':');
	}
	return err;
}

/*
 * 1 when @file is an ELF executable without a program interpreter (a
 * statically linked program: the dynamic loader never runs, so nothing
 * is preloaded), 0 otherwise (dynamically linked, a script, or anything
 * execve() will judge itself).
 */
static int is_static_elf(const char *file)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	Elf64_Ehdr eh;
	int ret = 0;

	if (fd < 0)
		return 0;
	if (pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) &&
	    !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 &&
	    eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum > 0 &&
	    (eh.e_type == ET_EXEC || eh.e_type == ET_DYN)) {
		bool interp = false;

		for (unsigned int i = 0; i < eh.e_phnum && !interp; i++) {
			Elf64_Phdr ph;

			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff +
				  (Elf64_Off)i * sizeof(ph))) !=
			    (ssize_t)sizeof(ph))
				break;
			interp = ph.p_type == PT_INTERP;
		}
		ret = !interp;
	}
	close(fd);
	return ret;
}

/*
 * true when executing @file changes the user or group ID (set-user-ID or
 * set-group-ID to another owner, on a file system that honours it) or,
 * for a user other than root, grants capabilities: the kernel then runs
 * it in secure mode, and the loader ignores LD_PRELOAD.
 */
static bool is_secure_exec(const char *file)
{
	struct statvfs sv;
	struct stat st;

	if (stat(file, &st) || (!statvfs(file, &sv) && (sv.f_flag & ST_NOSUID)))
		return false;
	return ((st.st_mode & S_ISUID) && st.st_uid != getuid()) ||
	       ((st.st_mode & S_ISGID) && st.st_gid != getgid()) ||
	       (getuid() != 0 &&
		getxattr(file, "security.capability", NULL, 0) > 0);
}

/* The preload library: $TALLY_RUN_PRELOAD, beside the tool, installed. */
static bool find_preload(char *buf, size_t len)
{
	const char *env = getenv("TALLY_RUN_PRELOAD");
	char exe[PATH_MAX];
	ssize_t n;

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return !access(buf, R_OK);
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = 0;
		char *slash = strrchr(exe, '/');

		if (slash) {
			*slash = 0;
			if (snprintf(buf, len, "%s/%s", exe, PRELOAD_SO) <
			    (int)len && !access(buf, R_OK))
				return true;
		}
	}
	snprintf(buf, len, "%s/tally/%s", TALLY_LIBDIR, PRELOAD_SO);
	return !access(buf, R_OK);
}

static volatile sig_atomic_t child_pid;

static void forward(int sig)
{
	if (child_pid > 0)
		kill((pid_t)child_pid, sig);
}

static bool setenv_long(const char *name, long v)
{
	char s[32];

	snprintf(s, sizeof(s), "%ld", v);
	return !setenv(name, s, 1);
}

/* In the child: the environment of the program, then exec. */
static void exec_child(char **argv, const char *preload, long max, long high,
		       const char *metrics, long interval_ms, int fd)
{
	const char *old = getenv("LD_PRELOAD");
	const char *conf = getenv("MALLOC_CONF");
	size_t n = strlen(preload) + (old ? strlen(old) : 0) + 64;
	char *ld = malloc(n), *mc;
	unsigned char err;

	/* jemalloc's huge arena would be created without the hooks. */
	mc = malloc((conf ? strlen(conf) : 0) + 32);
	if (!ld || !mc)
		goto fail;
	snprintf(ld, n, "%s:%s%s%s", JEMALLOC_SO, preload, old && *old ? ":" :
		 "", old ? old : "");
	sprintf(mc, "%s%soversize_threshold:0", conf ? conf : "",
		conf && *conf ? "," : "");
	/* What the preload reads is this command line's, nothing inherited. */
	if (unsetenv("TALLY_RUN_MEMORY_MAX") ||
	    unsetenv("TALLY_RUN_MEMORY_HIGH") ||
	    unsetenv("TALLY_RUN_METRICS") ||
	    unsetenv("TALLY_RUN_INTERVAL_MS") ||
	    setenv("LD_PRELOAD", ld, 1) || setenv("MALLOC_CONF", mc, 1) ||
	    !setenv_long("TALLY_RUN_FD", fd) ||
	    !setenv_long("TALLY_RUN_PID", (long)getpid()) ||
	    (max != TALLY_MEMCG_UNLIMITED &&
	     !setenv_long("TALLY_RUN_MEMORY_MAX", max)) ||
	    (high != TALLY_MEMCG_UNLIMITED &&
	     !setenv_long("TALLY_RUN_MEMORY_HIGH", high)) ||
	    (metrics && (setenv("TALLY_RUN_METRICS", metrics, 1) ||
			 !setenv_long("TALLY_RUN_INTERVAL_MS", interval_ms))))
		goto fail;
	execvp(argv[0], argv);
	fprintf(stderr, "tally: run: %s: %s\n", argv[0], strerror(errno));
	err = errno == ENOENT ? 'n' : 'x';
	if (write(fd, &err, 1) < 0)
		_exit(RUN_EXIT_FAILED);
	_exit(errno == ENOENT ? RUN_EXIT_MISSING : RUN_EXIT_CANNOT);
fail:
	fprintf(stderr, "tally: run: cannot set the environment: %s\n",
		strerror(errno));
	_exit(RUN_EXIT_FAILED);
}

int tally_cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "memory-max", required_argument, NULL, 'x' },
		{ "memory-high", required_argument, NULL, 'H' },
		{ "metrics", required_argument, NULL, 'm' },
		{ "interval", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	/* Options end at the program's name: the rest are its arguments. */
	static const struct tool_command cmd = {
		"run", run_usage, "", longopts, run_option, true
	};
	struct run_args a = { TALLY_MEMCG_UNLIMITED, TALLY_MEMCG_UNLIMITED,
			      10000, NULL };
	char preload[PATH_MAX], prog[PATH_MAX], metrics[PATH_MAX];
	int i, pfd[2], status, err;

	err = tool_parse_options(&cmd, argc, argv, &a, &i);
	if (err)
		return err > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
	if (i >= argc) {
		tool_usage_error("no program to run");
		return CLI_EXIT_USAGE;
	}
	err = resolve(argv[i], prog, sizeof(prog));
	if (err) {
		fprintf(stderr, "tally: run: %s: %s\n", argv[i],
			err == ENOENT ? "command not found" : strerror(err));
		return err == ENOENT ? RUN_EXIT_MISSING : RUN_EXIT_CANNOT;
	}
	if (is_static_elf(prog)) {
		fprintf(stderr, "tally: run: %s is statically linked: its "
			"allocations cannot be accounted (the preload needs "
			"the dynamic loader)\n", prog);
		return RUN_EXIT_CANNOT;
	}
	if (is_secure_exec(prog)) {
		fprintf(stderr, "tally: run: %s is set-user-ID, set-group-ID "
			"or has file capabilities: the loader would run it "
			"without the preload (LD_PRELOAD is ignored in secure "
			"mode)\n", prog);
		return RUN_EXIT_CANNOT;
	}
	if (!find_preload(preload, sizeof(preload))) {
		fprintf(stderr, "tally: run: cannot find %s (set "
			"TALLY_RUN_PRELOAD): %s\n", PRELOAD_SO,
			strerror(errno));
		return RUN_EXIT_FAILED;
	}
	if (strpbrk(preload, " :")) {
		fprintf(stderr, "tally: run: cannot preload %s: LD_PRELOAD "
			"splits its list at spaces and colons\n", preload);
		return RUN_EXIT_FAILED;
	}
	/* The program may change directory: the file is named from here. */
	if (a.metrics && a.metrics[0] != '/') {
		char cwd[PATH_MAX];

		err = getcwd(cwd, sizeof(cwd)) ? 0 : errno;
		if (!err && snprintf(metrics, sizeof(metrics), "%s/%s", cwd,
				     a.metrics) >= (int)sizeof(metrics))
			err = ENAMETOOLONG;
		if (err) {
			fprintf(stderr, "tally: run: %s: cannot name it from "
				"the current directory: %s\n", a.metrics,
				strerror(err));
			return RUN_EXIT_FAILED;
		}
		a.metrics = metrics;
	}
	/* The pipe's write end stays open across exec (no O_CLOEXEC). */
	if (pipe(pfd)) {
		fprintf(stderr, "tally: run: pipe: %s\n", strerror(errno));
		return RUN_EXIT_FAILED;
	}
	fcntl(pfd[0], F_SETFD, FD_CLOEXEC);
	fflush(NULL);
	pid_t pid = fork();

	if (pid < 0) {
		fprintf(stderr, "tally: run: fork: %s\n", strerror(errno));
		return RUN_EXIT_FAILED;
	}
	if (pid == 0) {
		close(pfd[0]);
		exec_child(argv + i, preload, a.max, a.high, a.metrics,
			   a.interval_ms, pfd[1]);
	}
	close(pfd[1]);
	child_pid = pid;
	struct sigaction sa = { .sa_handler = forward };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);

	char c = 0;
	ssize_t n;

	do
		n = read(pfd[0], &c, 1);
	while (n < 0 && errno == EINTR);
	close(pfd[0]);
	if (n != 1) {
		/* The program runs without the preload (the loader could not
		 * load it, or ignored LD_PRELOAD): it must not run
		 * unaccounted. */
		kill(pid, SIGKILL);
		fprintf(stderr, "tally: run: %s started without the "
			"accounting: the loader did not preload %s and %s "
			"(missing, or a set-user-ID program)\n", prog,
			JEMALLOC_SO, preload);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			fprintf(stderr, "tally: run: waitpid: %s\n",
				strerror(errno));
			return RUN_EXIT_FAILED;
		}
	if (n != 1)
		return RUN_EXIT_FAILED;
	if (c == 'n')
		return RUN_EXIT_MISSING;
	if (c == 'x')
		return RUN_EXIT_CANNOT;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
