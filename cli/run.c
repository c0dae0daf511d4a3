// SPDX-License-Identifier: MIT
/*
 * run.c - `tally run`: run a program with every allocation of its process
 * charged to one memory group, under the limits of the command line.
 *
 * The program is found in PATH as execvp() would, then checked down its
 * #! chain (the kernel runs a script's interpreter): what it ends in must
 * be an x86-64 ELF that the dynamic loader starts, outside secure mode,
 * or the preload would never run.  It is executed directly (execve() of
 * that path, never through a shell: a file neither ELF nor #! is an
 * error) in a child whose environment preloads jemalloc and
 * libtally_run.so (cli/run_preload.c), which installs the
 * accounting before the program's main() and tells this process through
 * a pipe that it did.
 *
 * Invariant: no program runs unaccounted for longer than HANDSHAKE_MS.
 * A close-on-exec pipe confirms the exec (or carries its errno); from
 * then the preload has HANDSHAKE_MS to report, or the program is killed.
 * The deadline, not the pipe's end of file, bounds the wait: a program
 * the preload never ran in holds the handshake pipe's write end.
 * This process then waits, forwarding SIGINT, SIGTERM, SIGHUP and
 * SIGQUIT, and exits with the program's status.
 */
#define _GNU_SOURCE	/* pipe2, environ */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <tally/memcg.h>

#include "../tool/args.h"
#include "cli.h"
#include "run_ledger.h"

/* Exit statuses of tally run besides the program's (as env(1) has them). */
#define RUN_EXIT_FAILED 125	/* tally itself failed */
#define RUN_EXIT_CANNOT 126	/* the program cannot be run */
#define RUN_EXIT_MISSING 127	/* the program was not found */

/*
 * How long the preload has, from the exec, to report: it runs before the
 * program's main(), once the loader has loaded the libraries.
 */
#define HANDSHAKE_MS 5000

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
"                      it as it handles any out-of-memory error; at least\n"
"                      what jemalloc holds as the program starts (its first\n"
"                      pages, 2 MiB), or tally run exits 125 naming it\n"
"  --memory-high SIZE  the group's high (events, no failure)\n"
"  --metrics FILE      write each process's memory files (usage, peak,\n"
"                      limits, events) and jemalloc and RSS figures as a\n"
"                      Prometheus textfile, replaced atomically as the\n"
"                      program starts, every interval, at its exit, and by\n"
"                      tally run once it has ended, whatever ended it\n"
"  --interval S        seconds between two writes (default 10; 0.001 to\n"
"                      86400, decimals allowed)\n"
"\n"
"SIZE is a number of bytes with an optional binary suffix K, M, G or T\n"
"(KiB, MiB, GiB, TiB; 'k', 'KiB', 'KB' alike), or 'max' for no limit.\n"
"\n"
"Python's objects are charged too: the program gets PYTHONMALLOC=malloc,\n"
"unless PYTHONMALLOC is set and not empty.  Then it is left as it is, and\n"
"with pymalloc (Python's default, also under debug and pymalloc_debug)\n"
"objects of up to 512 bytes live in arenas Python maps itself, which are\n"
"not charged.  A Python started with -E or -I ignores PYTHONMALLOC.\n"
"\n"
"What it cannot see: memory not allocated through malloc: the program's own\n"
"mmap() calls (V8's heap in node, for one), thread stacks, its code and\n"
"static data, the kernel's buffers; allocators of its own that take big\n"
"blocks from malloc count as those blocks.  The metrics file shows how\n"
"much: tally_run_uncharged_bytes is the process's RSS minus the\n"
"bytes charged (0 when the charge is larger).\n"
"\n"
"Each process is accounted on its own, one limit per process: programs it\n"
"starts inherit the preload and are accounted with the same limits in\n"
"their own process; a forked child starts with its copy of the parent's\n"
"usage.  The metrics file has a series per process (labels pid and\n"
"program) for the program and for every process of its tree that had a\n"
"memory event or was killed by a signal, recorded as each one ends (also\n"
"by _exit(), SIGABRT, SIGSEGV, SIGBUS, SIGILL or SIGFPE); a family that is\n"
"0 for all of them is left out.\n"
"\n"
"Statically linked programs cannot be run (the preload needs the dynamic\n"
"loader), nor 32-bit ones, nor set-user-ID or set-group-ID ones (the loader\n"
"ignores the preload for them); a #! script is judged by the program its\n"
"chain of interpreters ends in.  A program whose preload has not reported\n"
"%d s after its start (it was not loaded, or the program dropped it) is\n"
"killed.\n"
"\n"
"The preload library, libtally_run.so, is found from the tally binary:\n"
"beside it (a build tree), or where `make install` put it, LIBDIR/tally\n"
"relative to BINDIR (../lib/tally, ../lib64/tally), whatever PREFIX and\n"
"wherever the prefix was moved; the environment's TALLY_RUN_PRELOAD, a\n"
"path, names another one.\n"
"\n"
"Exit status: the program's, or 128+N when signal N killed it; %d bad\n"
"command line (unparseable size or interval, no program, a metrics file\n"
"that cannot be written: its directory missing or not writable); %d tally\n"
"failed (the preload library or jemalloc missing, the accounting could not\n"
"be installed or did not report); %d the program cannot be run (not\n"
"executable, neither ELF nor #!, statically linked, 32-bit,\n"
"set-user-ID); %d the program was not found.\n",
		HANDSHAKE_MS / 1000,
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
	const char *ledger;	/* the ledger's path, or NULL */
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

/* What the kernel would load for a file, as far as the checks care. */
enum exe_kind {
	EXE_OTHER,	/* not ELF nor #!: execve() judges it (ENOEXEC) */
	EXE_SCRIPT,	/* #!: its interpreter is executed in its place */
	EXE_DYNAMIC,	/* an x86-64 ELF with a program interpreter */
	EXE_STATIC,	/* an x86-64 ELF without: no loader, no preload */
	EXE_FOREIGN,	/* an ELF of another class or machine (32-bit...) */
};

/* The kernel reads this much of a #! line (BINPRM_BUF_SIZE). */
#define SHEBANG_MAX 256

/*
 * What @file is; for a #! script its interpreter's path in @interp (the
 * first word of the line, as the kernel takes it; relative to the
 * current directory as for the kernel).  A file that cannot be read is
 * EXE_OTHER: execve() reports its error.
 */
static enum exe_kind exe_kind(const char *file, char *interp, size_t len)
{
	union {
		Elf64_Ehdr eh;
		char line[SHEBANG_MAX + 1];
	} buf;
	enum exe_kind kind = EXE_OTHER;
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return EXE_OTHER;
	memset(&buf, 0, sizeof(buf));
	n = pread(fd, &buf, sizeof(buf) - 1, 0);
	if (n >= 2 && buf.line[0] == '#' && buf.line[1] == '!') {
		char *p = buf.line + 2;
		size_t w;

		p += strspn(p, " \t");
		w = strcspn(p, " \t\n");
		if (w && w < len) {
			memcpy(interp, p, w);
			interp[w] = 0;
			kind = EXE_SCRIPT;
		}
	} else if (n >= (ssize_t)EI_NIDENT &&
		   !memcmp(buf.eh.e_ident, ELFMAG, SELFMAG)) {
		Elf64_Ehdr *eh = &buf.eh;

		kind = EXE_FOREIGN;
		if (eh->e_ident[EI_CLASS] == ELFCLASS64 &&
		    eh->e_ident[EI_DATA] == ELFDATA2LSB &&
		    n >= (ssize_t)sizeof(*eh) && eh->e_machine == EM_X86_64)
			kind = EXE_DYNAMIC;
		/* The kernel loads the first PT_INTERP it meets. */
		if (kind == EXE_DYNAMIC && eh->e_phentsize == sizeof(Elf64_Phdr)) {
			kind = EXE_STATIC;
			for (unsigned int i = 0; i < eh->e_phnum; i++) {
				Elf64_Phdr ph;

				if (pread(fd, &ph, sizeof(ph), (off_t)(eh->e_phoff +
					  (Elf64_Off)i * sizeof(ph))) !=
				    (ssize_t)sizeof(ph))
					break;
				if (ph.p_type == PT_INTERP) {
					kind = EXE_DYNAMIC;
					break;
				}
			}
		}
	}
	close(fd);
	return kind;
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

/*
 * The kernel executes a #! script's interpreter, which may be a script
 * too: up to five scripts, then ELOOP.
 */
#define SCRIPT_DEPTH_MAX 5

/*
 * Whether @prog can run accounted: the program the kernel would load
 * for it, down its #! chain, must be an x86-64 ELF that the dynamic
 * loader starts, without secure mode.  0, or RUN_EXIT_CANNOT after
 * saying why.  What is not ELF nor #! is left to execve().
 */
static int check_program(const char *prog)
{
	char path[2][PATH_MAX];
	const char *file = prog;
	enum exe_kind kind;
	int depth = 0;

	while ((kind = exe_kind(file, path[depth % 2], PATH_MAX)) ==
	       EXE_SCRIPT) {
		if (depth++ == SCRIPT_DEPTH_MAX) {
			fprintf(stderr, "tally: run: %s: more than %d levels "
				"of #! interpreters (the kernel refuses it)\n",
				prog, SCRIPT_DEPTH_MAX);
			return RUN_EXIT_CANNOT;
		}
		file = path[(depth - 1) % 2];
	}
	if (kind == EXE_STATIC) {
		fprintf(stderr, "tally: run: %s is statically linked%s%s%s: "
			"its allocations cannot be accounted (the preload "
			"needs the dynamic loader)\n", file,
			depth ? " (the #! interpreter of " : "",
			depth ? prog : "", depth ? ")" : "");
		return RUN_EXIT_CANNOT;
	}
	if (kind == EXE_FOREIGN) {
		fprintf(stderr, "tally: run: %s is not an x86-64 program "
			"(32-bit, or another machine's): the loader would "
			"ignore the preload\n", file);
		return RUN_EXIT_CANNOT;
	}
	if (kind == EXE_DYNAMIC && is_secure_exec(file)) {
		fprintf(stderr, "tally: run: %s is set-user-ID, set-group-ID "
			"or has file capabilities: the loader would run it "
			"without the preload (LD_PRELOAD is ignored in secure "
			"mode)\n", file);
		return RUN_EXIT_CANNOT;
	}
	return 0;
}

/*
 * Where the preload library is looked for, relative to the directory of
 * the tally binary: beside it (the build tree), then where `make
 * install` puts it from the BINDIR it puts tally in (LIBDIR/tally, found
 * whatever PREFIX the install was given and wherever the prefix was
 * moved: TALLY_BINDIR_TO_LIBDIR is LIBDIR relative to BINDIR, as this
 * binary was built), then the usual LIBDIRs of a prefix.
 */
#ifndef TALLY_BINDIR_TO_LIBDIR
#define TALLY_BINDIR_TO_LIBDIR "../lib"
#endif
static const char *const preload_dirs[] = {
	".", TALLY_BINDIR_TO_LIBDIR "/tally", "../lib/tally",
	"../lib64/tally",
};
#define PRELOAD_DIRS (sizeof(preload_dirs) / sizeof(preload_dirs[0]))

/*
 * The preload library into @buf: $TALLY_RUN_PRELOAD, else the first of
 * preload_dirs[] that has it, else TALLY_LIBDIR's (the LIBDIR this binary
 * was built for).  0, or an errno: then @buf holds $TALLY_RUN_PRELOAD
 * when it was set, "" otherwise.
 */
static int find_preload(char *buf, size_t len)
{
	const char *env = getenv("TALLY_RUN_PRELOAD");
	char exe[PATH_MAX];
	ssize_t n;

	if (env && *env) {
		if (snprintf(buf, len, "%s", env) >= (int)len)
			return ENAMETOOLONG;
		return access(buf, R_OK) ? errno : 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = 0;
		char *slash = strrchr(exe, '/');

		if (slash) {
			*slash = 0;
			for (size_t i = 0; i < PRELOAD_DIRS; i++)
				if (snprintf(buf, len, "%s/%s/%s", exe,
					     preload_dirs[i], PRELOAD_SO) <
				    (int)len && !access(buf, R_OK))
					return 0;
		}
	}
	if (snprintf(buf, len, "%s/tally/%s", TALLY_LIBDIR, PRELOAD_SO) <
	    (int)len && !access(buf, R_OK))
		return 0;
	buf[0] = 0;
	return ENOENT;
}

/*
 * Whether the preload can write the textfile @path (absolute): its
 * directory must be one this process can create a file in (the file is
 * written beside it and renamed over it), and @path not a directory.
 * 0, or the errno that says why not.  Checked before the program starts:
 * a file that cannot be written is a bad command line, not an error
 * repeated at every write while the program runs.
 */
static int check_metrics_path(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (stat(dir, &st))
		return errno;
	if (!S_ISDIR(st.st_mode))
		return ENOTDIR;
	if (access(dir, W_OK | X_OK))
		return errno;
	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		return EISDIR;
	return 0;
}

/*
 * The textfile once more, when the program has ended: how it ended (the
 * signal that killed it, which a SIGKILL leaves no handler to record),
 * and what the processes that ended after its last write recorded.
 */
static void write_final_metrics(struct run_ledger *l, pid_t pid, int status,
				const char *path)
{
	struct run_slot *s = run_ledger_find(l, pid);
	int ret;

	if (!s)
		return;		/* the preload never ran: nothing to say */
	if (WIFSIGNALED(status))
		run_slot_set(s, RF_SIGNAL, WTERMSIG(status));
	ret = run_ledger_write(l, pid, path);
	if (ret)
		fprintf(stderr, "tally: run: cannot write %s: %s\n", path,
			strerror(-ret));
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

/*
 * In the child: the environment of the program, then execve() of @prog,
 * the file resolve() found (never a shell: ENOEXEC is an error).  @fd is
 * the handshake pipe the preload writes to (inherited); on failure the
 * errno goes to @exec_fd (close-on-exec: it closes on success).
 */
static void exec_child(const char *prog, char **argv, const char *preload,
		       const struct run_args *a, int fd, int exec_fd)
{
	const char *old = getenv("LD_PRELOAD");
	const char *conf = getenv("MALLOC_CONF");
	const char *py;
	size_t n = strlen(preload) + (old ? strlen(old) : 0) + 64;
	char *ld = malloc(n), *mc;
	int err;

	/* jemalloc's huge arena would be created without the hooks. */
	mc = malloc((conf ? strlen(conf) : 0) + 32);
	if (!ld || !mc)
		goto fail;
	snprintf(ld, n, "%s:%s%s%s", preload, JEMALLOC_SO, old && *old ? ":" :
		 "", old ? old : "");
	sprintf(mc, "%s%soversize_threshold:0", conf ? conf : "",
		conf && *conf ? "," : "");
	/*
	 * CPython's small objects live in arenas it maps itself, which the
	 * charge cannot see: they go through malloc() unless the user chose
	 * an allocator (an empty value is Python's default, as unset).
	 */
	py = getenv("PYTHONMALLOC");
	/* What the preload reads is this command line's, nothing inherited. */
	if (((!py || !*py) && setenv("PYTHONMALLOC", "malloc", 1)) ||
	    unsetenv("TALLY_RUN_MEMORY_MAX") ||
	    unsetenv("TALLY_RUN_MEMORY_HIGH") ||
	    unsetenv("TALLY_RUN_METRICS") ||
	    unsetenv("TALLY_RUN_INTERVAL_MS") ||
	    unsetenv("TALLY_RUN_LEDGER") ||
	    setenv("LD_PRELOAD", ld, 1) || setenv("MALLOC_CONF", mc, 1) ||
	    !setenv_long("TALLY_RUN_FD", fd) ||
	    !setenv_long("TALLY_RUN_PID", (long)getpid()) ||
	    (a->max != TALLY_MEMCG_UNLIMITED &&
	     !setenv_long("TALLY_RUN_MEMORY_MAX", a->max)) ||
	    (a->high != TALLY_MEMCG_UNLIMITED &&
	     !setenv_long("TALLY_RUN_MEMORY_HIGH", a->high)) ||
	    (a->metrics &&
	     (setenv("TALLY_RUN_METRICS", a->metrics, 1) ||
	      !setenv_long("TALLY_RUN_INTERVAL_MS", a->interval_ms) ||
	      setenv("TALLY_RUN_LEDGER", a->ledger, 1))))
		goto fail;
	execve(prog, argv, environ);
	err = errno;
	if (write(exec_fd, &err, sizeof(err)) < 0)
		_exit(RUN_EXIT_FAILED);
	_exit(RUN_EXIT_CANNOT);
fail:
	fprintf(stderr, "tally: run: cannot set the environment: %s\n",
		strerror(errno));
	err = -1;
	if (write(exec_fd, &err, sizeof(err)) < 0)
		_exit(RUN_EXIT_FAILED);
	_exit(RUN_EXIT_FAILED);
}

/*
 * Fork the child that executes @prog (exec_child()).  Its pid, or -1
 * after saying why; *@exec_fd reads exec_result(), *@hs_fd the
 * preload's handshake.
 */
static pid_t start(const char *prog, char **argv, const char *preload,
		   const struct run_args *a, int *exec_fd, int *hs_fd)
{
	int xp[2], hp[2];
	pid_t pid;

	if (pipe2(xp, O_CLOEXEC)) {
		fprintf(stderr, "tally: run: pipe: %s\n", strerror(errno));
		return -1;
	}
	/* The handshake's write end stays open across exec. */
	if (pipe(hp)) {
		fprintf(stderr, "tally: run: pipe: %s\n", strerror(errno));
		close(xp[0]);
		close(xp[1]);
		return -1;
	}
	fcntl(hp[0], F_SETFD, FD_CLOEXEC);
	pid = fork();
	if (pid == 0) {
		close(xp[0]);
		close(hp[0]);
		exec_child(prog, argv, preload, a, hp[1], xp[1]);
	}
	close(xp[1]);
	close(hp[1]);
	if (pid < 0) {
		fprintf(stderr, "tally: run: fork: %s\n", strerror(errno));
		close(xp[0]);
		close(hp[0]);
		return -1;
	}
	*exec_fd = xp[0];
	*hs_fd = hp[0];
	return pid;
}

/*
 * What became of the child's execve(), from @fd (closed): 0 when it
 * succeeded (the close-on-exec pipe closed without a word), its errno
 * when it failed, -1 when the child failed before (and said why).
 */
static int exec_result(int fd)
{
	int err = 0;
	ssize_t n;

	do
		n = read(fd, &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(fd);
	return n == (ssize_t)sizeof(err) ? err : 0;
}

/*
 * Whether the preload reported on @fd within HANDSHAKE_MS of the exec:
 * '+' installed, or '-' failed (it then exits 125 by itself).  Nothing
 * (the pipe closed, or the time ran out) means the program runs without
 * it.  The program holds the pipe's write end when the preload never
 * ran: only the deadline ends the wait then.
 */
static bool handshake(int fd)
{
	struct timespec now, end;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += HANDSHAKE_MS / 1000;
	for (;;) {
		long ms;

		clock_gettime(CLOCK_MONOTONIC, &now);
		ms = (end.tv_sec - now.tv_sec) * 1000 +
		     (end.tv_nsec - now.tv_nsec) / 1000000;
		if (ms <= 0)
			return false;
		ret = poll(&p, 1, (int)ms);
		if (ret > 0)
			break;
		if (ret < 0 && errno != EINTR)
			return false;
	}
	while ((ret = (int)read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	return ret == 1;
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
			      10000, NULL, NULL };
	struct run_ledger *ledger = NULL;
	char preload[PATH_MAX], prog[PATH_MAX], metrics[PATH_MAX];
	char ledger_path[64];
	int i, exec_fd, hs_fd, status, err;
	pid_t pid;

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
	err = check_program(prog);
	if (err)
		return err;
	err = find_preload(preload, sizeof(preload));
	if (err) {
		if (preload[0])
			fprintf(stderr, "tally: run: TALLY_RUN_PRELOAD=%s: %s\n",
				preload, strerror(err));
		else
			fprintf(stderr, "tally: run: cannot find %s beside "
				"tally, in %s/tally or %s/tally from its "
				"directory, nor in %s/tally: build it with "
				"`make JEMALLOC=yes` (it needs Debian's "
				"libjemalloc-dev) and install it with tally, "
				"or name it in TALLY_RUN_PRELOAD\n", PRELOAD_SO,
				TALLY_BINDIR_TO_LIBDIR, "../lib64",
				TALLY_LIBDIR);
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
	if (a.metrics) {
		err = check_metrics_path(a.metrics);
		if (err) {
			fprintf(stderr, "tally: run: --metrics: cannot "
				"write %s: %s\n", a.metrics, strerror(err));
			return CLI_EXIT_USAGE;
		}
	}
	if (a.metrics) {
		ledger = run_ledger_create(ledger_path, sizeof(ledger_path));
		a.ledger = ledger_path;
		if (!ledger) {
			fprintf(stderr, "tally: run: cannot create the ledger "
				"of the processes' figures: %s\n",
				strerror(errno));
			return RUN_EXIT_FAILED;
		}
	}
	fflush(NULL);
	pid = start(prog, argv + i, preload, &a, &exec_fd, &hs_fd);
	if (pid < 0)
		return RUN_EXIT_FAILED;
	child_pid = pid;
	struct sigaction sa = { .sa_handler = forward };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);

	err = exec_result(exec_fd);
	if (err > 0) {
		fprintf(stderr, "tally: run: %s: cannot execute: %s%s\n", prog,
			strerror(err), err == ENOEXEC ? " (neither an ELF "
			"program nor a #! script)" : "");
	} else if (!err && !handshake(hs_fd)) {
		/* The program runs without the preload: the loader could
		 * not load it or ignored LD_PRELOAD, or the program dropped
		 * it.  It must not run on unaccounted. */
		kill(pid, SIGKILL);
		fprintf(stderr, "tally: run: %s started without the "
			"accounting (killed): the preloaded %s and %s did not "
			"report within %d s (missing, ignored by the loader, "
			"or dropped by the program)\n", prog, JEMALLOC_SO,
			preload, HANDSHAKE_MS / 1000);
		err = -1;
	}
	close(hs_fd);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			fprintf(stderr, "tally: run: waitpid: %s\n",
				strerror(errno));
			return RUN_EXIT_FAILED;
		}
	if (err)
		return err == ENOENT ? RUN_EXIT_MISSING :
		       err > 0 ? RUN_EXIT_CANNOT : RUN_EXIT_FAILED;
	if (ledger)
		write_final_metrics(ledger, pid, status, a.metrics);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
