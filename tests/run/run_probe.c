// SPDX-License-Identifier: MIT
/*
 * run_probe.c - a plain C program (no tally inside) for the `tally run`
 * checks of scripts/check-run.sh: what a program under a memory limit
 * sees, in the process tally run started, a forked child and an exec'd
 * image.
 *
 *   run_probe alloc MIB     allocate 1 MiB blocks up to MIB MiB, touching
 *                           them; print how many fit before malloc()
 *                           returned NULL (with errno)
 *   run_probe fork MIB      the same in a forked child, then in the parent
 *   run_probe exec MIB      exec this program's "alloc MIB"
 *   run_probe spawn MIB     fork a child that execs this program's
 *                           "alloc MIB", wait for it, exit with its status
 *   run_probe abort MIB     allocate as alloc does, then abort() (as a
 *                           program that treats a failed malloc() as fatal)
 *   run_probe fill          fill the max: 1 MiB blocks, then ever smaller
 *                           ones down to 8 bytes, until malloc() refuses
 *                           each; exit(0) holding them all
 *   run_probe realloc MIB   grow one block by 1 MiB steps with realloc()
 *                           up to MIB MiB; check the block kept its bytes
 *                           when realloc() refused
 *   run_probe threads       4 threads free each other's blocks; print the
 *                           blocks they freed
 *   run_probe aligned MIB   each of posix_memalign, aligned_alloc,
 *                           memalign, valloc, pvalloc, calloc and
 *                           reallocarray: a 4 KiB block (written, its
 *                           usable size read, freed), then one of MIB MiB;
 *                           print what each gave
 *   run_probe slow MIB      print "slow: started", then allocate as
 *                           alloc does, one MiB every 250 ms
 *   run_probe mmap MIB      map MIB MiB of private anonymous memory with
 *                           mmap() (a heap of its own, as V8's), write
 *                           every page, exit(0) with the mapping alive
 *   run_probe chdir DIR     chdir(DIR), then exit(0)
 *   run_probe _exit         _exit(0): no atexit() handler runs
 *   run_probe forks         4 threads allocate blocks of up to 12 MiB
 *                           until a fifth has forked 20 children that
 *                           allocate and exit; print the forks and the
 *                           refusals
 *   run_probe timer         create a SIGEV_THREAD timer (glibc starts
 *                           its helper thread, not the program), fill the
 *                           max as fill does, then let the timer fire 5
 *                           times (the helper thread's first malloc() is
 *                           made at the max); print the notifications
 *
 * Built with -DRUN_PROBE_UNPRELOAD (run_probe_unpreload), it is a
 * program that escapes a preload: before any library's constructor runs
 * (a preinit function of the executable), it drops LD_PRELOAD and
 * executes itself again, so its second image runs without the preloaded
 * libraries, holding whatever descriptors the first one inherited.
 *
 * Exit status 0 when the program saw what a program sees under malloc
 * (NULL and ENOMEM, an intact block), 1 otherwise.
 */
#define _GNU_SOURCE	/* pvalloc, reallocarray */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1l << 20)

#ifdef RUN_PROBE_UNPRELOAD
/*
 * A preinit function gets the environment as its third argument (libc's
 * own environ is not set yet): execute this program again with @envp
 * less LD_PRELOAD.
 */
static void unpreload(int argc, char **argv, char **envp)
{
	static char *env[4096];
	size_t n = 0;
	bool found = false;

	(void)argc;
	for (; *envp && n < sizeof(env) / sizeof(env[0]) - 1; envp++) {
		if (!strncmp(*envp, "LD_PRELOAD=", 11))
			found = true;
		else
			env[n++] = *envp;
	}
	if (found) {
		env[n] = NULL;
		execve("/proc/self/exe", argv, env);
		_exit(3);
	}
}

__attribute__((section(".preinit_array"), used))
static void (*const run_probe_preinit)(int, char **, char **) = unpreload;
#endif

/*
 * Every size class down to 8 bytes refused: the process stands at its
 * max, where whatever it (or a library at exit) allocates fails.
 */
static int fill(void)
{
	long blocks = 0;

	for (size_t size = MIB; size >= 8; size /= 2)
		while (malloc(size))
			blocks++;
	printf("fill: %ld blocks, then every size refused\n", blocks);
	fflush(stdout);
	return 0;
}

static atomic_int notified;

static void notify(union sigval v)
{
	(void)v;
	atomic_fetch_add(&notified, 1);
}

/*
 * A thread the program never started itself (glibc's, for a timer's
 * notifications) makes its first allocation at the max: like any, it may
 * be refused, never crash the program.
 */
static int timer_at_the_limit(void)
{
	struct sigevent ev = { .sigev_notify = SIGEV_THREAD,
			       .sigev_notify_function = notify };
	struct itimerspec every = { { 0, 10000000 }, { 0, 10000000 } };
	struct timespec tick = { 0, 10000000 };
	timer_t t;

	if (timer_create(CLOCK_MONOTONIC, &ev, &t))
		return 1;
	fill();
	if (timer_settime(t, 0, &every, NULL))
		return 1;
	for (int i = 0; i < 500 && atomic_load(&notified) < 5; i++)
		nanosleep(&tick, NULL);
	timer_delete(t);
	printf("timer: %d notifications at the max\n",
	       atomic_load(&notified));
	fflush(stdout);
	return 0;
}

/* Allocate up to @limit MiB, one MiB every @pause_ms milliseconds. */
static int alloc(const char *who, long limit, long pause_ms)
{
	struct timespec pause = { pause_ms / 1000,
				  (pause_ms % 1000) * 1000000 };
	void **blocks = calloc((size_t)limit, sizeof(void *));
	long n = 0;
	int err = 0;

	if (!blocks)
		return 1;
	for (; n < limit; n++) {
		errno = 0;
		blocks[n] = malloc(MIB);
		if (!blocks[n]) {
			err = errno;
			break;
		}
		memset(blocks[n], 1, MIB);
		if (pause_ms)
			nanosleep(&pause, NULL);
	}
	if (n < limit)
		printf("%s: malloc refused after %ld MiB: %s\n", who, n,
		       strerror(err));
	else
		printf("%s: allocated %ld MiB\n", who, n);
	while (n > 0)
		free(blocks[--n]);
	free(blocks);
	fflush(stdout);
	return err && err != ENOMEM;
}

static int grow(long limit)
{
	unsigned char *p = malloc(MIB), *q;
	long size = MIB;

	if (!p)
		return 1;
	for (long i = 0; i < size; i++)
		p[i] = (unsigned char)(i * 7);
	while (size < limit * MIB) {
		errno = 0;
		q = realloc(p, (size_t)(size + MIB));
		if (!q) {
			int err = errno;
			long bad = 0;

			for (long i = 0; i < MIB; i++)
				bad += p[i] != (unsigned char)(i * 7);
			printf("realloc refused at %ld MiB: %s, block %s\n",
			       size / MIB + 1, strerror(err),
			       bad ? "damaged" : "intact");
			free(p);
			return bad || err != ENOMEM;
		}
		p = q;
		memset(p + size, 2, MIB);
		size += MIB;
	}
	printf("realloc grew to %ld MiB\n", size / MIB);
	free(p);
	return 0;
}

#define NTHREADS 4
#define NBLOCKS 20000

static void *blocks[NTHREADS][NBLOCKS];
static pthread_barrier_t barrier;

static void *exchange(void *arg)
{
	long me = (long)arg, freed = 0;

	for (int i = 0; i < NBLOCKS; i++)
		blocks[me][i] = malloc(16 + (size_t)(i * 37 % 4000));
	pthread_barrier_wait(&barrier);
	for (int i = 0; i < NBLOCKS; i++) {
		free(blocks[(me + 1) % NTHREADS][i]);
		freed++;
	}
	return (void *)freed;
}

static int threads(void)
{
	pthread_t th[NTHREADS];
	long total = 0;

	pthread_barrier_init(&barrier, NULL, NTHREADS);
	for (long i = 0; i < NTHREADS; i++)
		if (pthread_create(&th[i], NULL, exchange, (void *)i))
			return 1;
	for (int i = 0; i < NTHREADS; i++) {
		void *r;

		pthread_join(th[i], &r);
		total += (long)r;
	}
	printf("threads freed %ld blocks of each other\n", total);
	return 0;
}

/* One of the aligned or zeroing allocators, by name. */
static void *alloc_with(const char *fn, size_t n, int *err)
{
	void *p = NULL;

	errno = 0;
	if (!strcmp(fn, "posix_memalign")) {
		int ret = posix_memalign(&p, 4096, n);

		errno = ret;
		if (ret)
			p = NULL;
	} else if (!strcmp(fn, "aligned_alloc")) {
		p = aligned_alloc(4096, n);
	} else if (!strcmp(fn, "memalign")) {
		p = memalign(4096, n);
	} else if (!strcmp(fn, "valloc")) {
		p = valloc(n);
	} else if (!strcmp(fn, "pvalloc")) {
		p = pvalloc(n);
	} else if (!strcmp(fn, "calloc")) {
		p = calloc(1, n);
	} else if (!strcmp(fn, "reallocarray")) {
		p = reallocarray(NULL, 1, n);
	}
	*err = errno;
	return p;
}

static int aligned(long limit)
{
	static const char *const fns[] = {
		"posix_memalign", "aligned_alloc", "memalign", "valloc",
		"pvalloc", "calloc", "reallocarray",
	};
	int bad = 0;

	for (unsigned int i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		int err;
		unsigned char *p = alloc_with(fns[i], 4096, &err);
		size_t usable;

		if (!p) {
			printf("%s: 4 KiB refused: %s\n", fns[i], strerror(err));
			bad = 1;
			continue;
		}
		usable = malloc_usable_size(p);
		memset(p, 5, usable);
		free(p);
		p = alloc_with(fns[i], (size_t)(limit * MIB), &err);
		if (p) {
			memset(p, 5, (size_t)(limit * MIB));
			free(p);
			printf("%s: 4 KiB (usable %zu), %ld MiB allocated\n",
			       fns[i], usable, limit);
		} else {
			printf("%s: 4 KiB (usable %zu), %ld MiB refused: %s\n",
			       fns[i], usable, limit, strerror(err));
			bad |= err != ENOMEM;
		}
		bad |= usable < 4096;
		fflush(stdout);
	}
	return bad;
}

/*
 * A heap of its own: @limit MiB mapped and written, left mapped so that
 * the figures written at exit see it resident.
 */
static int own_heap(long limit)
{
	size_t n = (size_t)(limit * MIB);
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		printf("mmap: %ld MiB refused: %s\n", limit, strerror(errno));
		return 1;
	}
	memset(p, 5, n);
	printf("mmap: %ld MiB mapped and written\n", limit);
	return 0;
}

struct forks_run {
	atomic_bool stop;
	atomic_long refusals;
};

/* Blocks of up to 12 MiB, the first page written, freed in turn. */
static void *allocate_until_stopped(void *arg)
{
	struct forks_run *run = arg;
	unsigned long x = (unsigned long)pthread_self();
	void *b[4] = { 0 };

	while (!atomic_load(&run->stop))
		for (unsigned int i = 0; i < 4; i++) {
			size_t n = 4096 + (x = x * 6364136223846793005ul +
						1442695040888963407ul) %
						(12ul << 20);

			free(b[i]);
			b[i] = malloc(n);
			if (b[i])
				memset(b[i], 1, 4096);
			else
				atomic_fetch_add(&run->refusals, 1);
		}
	for (unsigned int i = 0; i < 4; i++)
		free(b[i]);
	return NULL;
}

static int forks_at_the_limit(void)
{
	struct forks_run run = { .refusals = 0 };
	pthread_t th[NTHREADS];
	int forks = 0;

	for (int i = 0; i < NTHREADS; i++)
		if (pthread_create(&th[i], NULL, allocate_until_stopped, &run))
			return 1;
	for (int i = 0; i < 20; i++) {
		int status;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid < 0)
			break;
		if (pid == 0) {
			free(malloc(100000));
			_exit(0);
		}
		if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		    WEXITSTATUS(status) == 0)
			forks++;
	}
	atomic_store(&run.stop, true);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	printf("forks: %d forks, %ld refusals\n", forks,
	       atomic_load(&run.refusals));
	return forks != 20;
}

int main(int argc, char **argv)
{
	long mib = argc > 2 ? atol(argv[2]) : 0;

	if (argc < 2)
		return 2;
	if (!strcmp(argv[1], "alloc"))
		return alloc("alloc", mib, 0);
	if (!strcmp(argv[1], "slow")) {
		printf("slow: started\n");
		fflush(stdout);
		return alloc("slow", mib, 250);
	}
	if (!strcmp(argv[1], "realloc"))
		return grow(mib);
	if (!strcmp(argv[1], "threads"))
		return threads();
	if (!strcmp(argv[1], "aligned"))
		return aligned(mib);
	if (!strcmp(argv[1], "mmap"))
		return own_heap(mib);
	if (!strcmp(argv[1], "chdir") && argc > 2)
		return chdir(argv[2]) != 0;
	if (!strcmp(argv[1], "_exit"))
		_exit(0);
	if (!strcmp(argv[1], "forks"))
		return forks_at_the_limit();
	if (!strcmp(argv[1], "exec")) {
		execl("/proc/self/exe", argv[0], "alloc", argv[2],
		      (char *)NULL);
		perror("exec");
		return 1;
	}
	if (!strcmp(argv[1], "abort")) {
		alloc("abort", mib, 0);
		abort();
	}
	if (!strcmp(argv[1], "fill"))
		return fill();
	if (!strcmp(argv[1], "timer"))
		return timer_at_the_limit();
	if (!strcmp(argv[1], "spawn") && argc > 2) {
		int status;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			execl("/proc/self/exe", argv[0], "alloc", argv[2],
			      (char *)NULL);
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid ||
		    !WIFEXITED(status))
			return 1;
		return WEXITSTATUS(status);
	}
	if (!strcmp(argv[1], "fork")) {
		int status;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0)
			_exit(alloc("child", mib, 0));
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			return 1;
		return alloc("parent", mib, 0);
	}
	return 2;
}
