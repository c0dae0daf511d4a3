// SPDX-License-Identifier: MIT
/*
 * new_probe.cc - a plain C++ program (no tally inside) for the `tally
 * run` checks of scripts/check-run.sh: operator new at the limit.
 *
 *   new_probe handler MIB   a thread allocates MIB MiB of 2 KiB objects
 *                           with new and deletes them (its arena keeps
 *                           the pages, dirty); then the main thread,
 *                           with a new handler that ends the program
 *                           (exit 3), allocates as much again: room must
 *                           be made (the dirty pages purged) before the
 *                           program's handler is asked
 *   new_probe bad_alloc MIB new char[MIB MiB]: std::bad_alloc, caught
 *
 * Exit status 0 when the program saw what it sees without the limit's
 * accounting in the way, 1 otherwise.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

struct object {
	char bytes[2048];
};

static void handler_ends_the_program()
{
	std::fprintf(stderr, "new handler: out of memory\n");
	std::_Exit(3);
}

static int handler(long mib)
{
	const long n = mib * 512;	// 2 KiB objects
	std::vector<object *> v(static_cast<size_t>(n));

	std::thread([&] {
		for (long i = 0; i < n; i++) {
			v[i] = new object;
			std::memset(v[i], 1, sizeof(object));
		}
		for (long i = 0; i < n; i++)
			delete v[i];
	}).join();
	std::set_new_handler(handler_ends_the_program);
	for (long i = 0; i < n; i++) {
		v[i] = new object;
		std::memset(v[i], 2, sizeof(object));
	}
	std::printf("handler: %ld MiB allocated again without the handler\n",
		    mib);
	for (long i = 0; i < n; i++)
		delete v[i];
	return 0;
}

static int bad_alloc(long mib)
{
	try {
		char *p = new char[static_cast<size_t>(mib) << 20];

		std::memset(p, 1, static_cast<size_t>(mib) << 20);
		std::printf("bad_alloc: %ld MiB allocated\n", mib);
		delete[] p;
		return 1;
	} catch (const std::bad_alloc &) {
		std::printf("bad_alloc: %ld MiB refused with std::bad_alloc\n",
			    mib);
		return 0;
	}
}

int main(int argc, char **argv)
{
	long mib = argc > 2 ? std::atol(argv[2]) : 0;

	if (argc > 2 && !std::strcmp(argv[1], "handler"))
		return handler(mib);
	if (argc > 2 && !std::strcmp(argv[1], "bad_alloc"))
		return bad_alloc(mib);
	return 2;
}
