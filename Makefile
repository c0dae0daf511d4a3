# tally - top-level build.  `make` builds the library, the tests, the
# examples and the command-line tool into build/; `make test` runs every test
# in a plain, a fault-injection, an ASan+UBSan and a TSan build, the examples,
# and checks the shared library's exports and installation; `make demo` runs
# the reference benchmarks; `make docs` regenerates docs/API.md from the
# headers.

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR ?= $(PREFIX)/bin
BUILD ?= build
CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif

# One source of the version: include/tally/version.h.
VERSION := $(shell sh -c '. scripts/testlib.sh && header_version')
# The shared library: real file, soname (ABI 0) and link-time name.
SO_FILE := libtally.so.$(VERSION)
SONAME := libtally.so.0
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wpointer-arith -Wcast-align -Wwrite-strings -Wundef -Wvla \
	-Wformat=2 -Wno-unused-parameter
ifneq ($(CI),)
WARN += -Werror
endif
OPT ?= -O2 -g
SAN ?=
CFLAGS_ALL := -std=gnu11 -fPIC -pthread $(OPT) $(SAN) $(WARN) -Iinclude -Isrc \
	$(CFLAGS)
LDFLAGS_ALL := -pthread $(SAN) $(LDFLAGS)
LIBS := -lm

LIB_SRC := $(wildcard src/*.c)
BENCH_SRC := $(wildcard bench/*.c)
CLI_SRC := $(wildcard cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_SUPPORT := $(filter-out $(TEST_SRC),$(wildcard tests/*.c))
EXAMPLE_SRC := $(wildcard examples/*.c)
PUBLIC_HEADERS := $(wildcard include/tally/*.h include/tally/*/*.h)
HEADERS := $(PUBLIC_HEADERS) $(wildcard src/*.h bench/*.h tests/*.h cli/*.h)

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
SUPPORT_OBJ := $(TEST_SUPPORT:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
SO_LINKS := $(BUILD)/$(SONAME) $(BUILD)/libtally.so

.PHONY: all lib tests examples test check demo docs install uninstall clean \
	deps
# Keep the test objects make sees as intermediate: no relink every run.
.SECONDARY:
.DEFAULT_GOAL := all

all: deps lib $(BUILD)/tally tests examples

deps:
	@sh scripts/ensure-deps.sh build

lib: $(BUILD)/libtally.a $(BUILD)/$(SO_FILE) $(SO_LINKS)

tests: $(TEST_BIN)

examples: $(EXAMPLE_BIN)

$(BUILD)/obj/%.o: %.c $(HEADERS) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/libtally.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library exports what include/tally/ declares and nothing else
# (the version script, generated from the headers, makes the rest local);
# --no-undefined-version fails the link when a header declares a symbol no
# source defines.  -z defs (no undefined symbol left) only without
# sanitizers, whose runtimes resolve at load time.
$(BUILD)/tally.map: $(PUBLIC_HEADERS) scripts/gen-exports.sh
	@mkdir -p $(dir $@)
	CC="$(CC)" sh scripts/gen-exports.sh map > $@.tmp
	@mv $@.tmp $@

$(BUILD)/$(SO_FILE): $(LIB_OBJ) $(BUILD)/tally.map
	$(CC) -shared -Wl,-soname,$(SONAME) \
		-Wl,--version-script,$(BUILD)/tally.map -Wl,--no-undefined-version \
		$(if $(findstring -fsanitize,$(SAN)),,-Wl,-z,defs) \
		-o $@ $(LIB_OBJ) $(LDFLAGS_ALL) $(LIBS)

$(BUILD)/$(SONAME): $(BUILD)/$(SO_FILE)
	ln -sf $(SO_FILE) $@

$(BUILD)/libtally.so: $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

$(BUILD)/tally: $(CLI_OBJ) $(BENCH_OBJ) $(BUILD)/libtally.a
	$(CC) -o $@ $(CLI_OBJ) $(BENCH_OBJ) $(BUILD)/libtally.a $(LDFLAGS_ALL) $(LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(SUPPORT_OBJ) $(BUILD)/libtally.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(SUPPORT_OBJ) $(BUILD)/libtally.a $(LDFLAGS_ALL) $(LIBS)

# The examples are what a user writes: public headers only, no -Isrc, and
# ISO C11 (no GNU extension the headers would need the user to enable).
$(BUILD)/examples/%: examples/%.c $(PUBLIC_HEADERS) $(BUILD)/libtally.a Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) $(SAN) $(WARN) -Iinclude -o $@ $< \
		$(BUILD)/libtally.a $(LDFLAGS_ALL) $(LIBS)

# Every test, four builds: plain, fault injection, ASan+UBSan, TSan.
# TALLY_INJECT compiles the hook points of src/inject.h in (the inject and
# ASan builds), so the tests can preempt, migrate or signal a thread at the
# point where it matters, or make a system call fail.  TALLY_DEBUG keeps
# destroyed stats groups poisoned, so an update after destroy aborts instead
# of touching freed memory.  TSan does not model stand-alone fences
# (-Wno-tsan): tally uses them for store-load ordering on the simulated and
# no-membarrier paths, never for happens-before.  The runner also runs the
# examples, scripts/check-exports.sh, scripts/check-cli.sh (the tool) and
# scripts/check-docs.sh (docs/API.md up to date, every function's Context),
# and prints the closing "N passed, N failed" line.
test: deps
	@sh scripts/ensure-deps.sh test
	$(MAKE) --no-print-directory BUILD=build lib tests examples build/tally
	$(MAKE) --no-print-directory BUILD=build/inject OPT="-O2 -g" \
		SAN="-DTALLY_INJECT -DTALLY_DEBUG" tests
	$(MAKE) --no-print-directory BUILD=build/asan OPT="-O1 -g" \
		SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -DTALLY_DEBUG -DTALLY_INJECT" tests
	$(MAKE) --no-print-directory BUILD=build/tsan OPT="-O1 -g" \
		SAN="-fsanitize=thread -Wno-tsan" tests
	@sh scripts/run-tests.sh

check: test

# The API reference, generated from the headers' comments; `make test`
# (scripts/check-docs.sh) fails when the committed copy is stale.
docs:
	sh scripts/gen-api-docs.sh > docs/API.md.tmp || \
		{ rm -f docs/API.md.tmp; exit 1; }
	@mv docs/API.md.tmp docs/API.md

# make demo: every benchmark's tables, its JSON in $(DEMO), and the plots
# of that JSON with their index in $(DEMO)/plots (gnuplot is installed
# like the other dependencies).
DEMO ?= $(BUILD)/demo
demo: all
	@sh scripts/ensure-deps.sh demo
	@mkdir -p $(DEMO)
	$(BUILD)/tally bench counter --json $(DEMO)/counter.json
	$(BUILD)/tally bench stats --json $(DEMO)/stats.json
	$(BUILD)/tally bench oom --json $(DEMO)/oom.json
	$(BUILD)/tally bench export --json $(DEMO)/export.json
	$(BUILD)/tally bench charge --json $(DEMO)/charge.json
	rm -rf $(DEMO)/plots
	for b in counter stats oom export charge; do \
		$(BUILD)/tally plot $(DEMO)/$$b.json -o $(DEMO)/plots || exit 1; \
	done
	@echo "plots: $(DEMO)/plots/index.html"

# Headers keep their directories (include/tally/arch/...).  No ldconfig:
# DESTDIR installs are staged; the symlinks are made here instead.
# LIBDIR (e.g. $(PREFIX)/lib64 or /usr/lib/x86_64-linux-gnu), INCLUDEDIR
# and BINDIR may be set apart from PREFIX; tally.pc names them.
install: lib $(BUILD)/tally
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(BINDIR)
	for h in $(PUBLIC_HEADERS:include/%=%); do \
		install -d $(DESTDIR)$(INCLUDEDIR)/$${h%/*} && \
		install -m 644 include/$$h $(DESTDIR)$(INCLUDEDIR)/$$h || exit 1; \
	done
	install -m 644 $(BUILD)/libtally.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/$(SO_FILE) $(DESTDIR)$(LIBDIR)/
	ln -sf $(SO_FILE) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libtally.so
	install -m 755 $(BUILD)/tally $(DESTDIR)$(BINDIR)/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
		-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' \
		tally.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/tally.pc

# What install put there, with the same variables, and the directories of
# tally's own headers (include/tally and below) when left empty, deepest
# first.  The directories it shares with others (bin, lib, lib/pkgconfig,
# include) stay, even empty: they are the system's.  No error either way.
UNINSTALL_DIRS := $(patsubst %/,%,$(dir \
	$(PUBLIC_HEADERS:include/%=$(DESTDIR)$(INCLUDEDIR)/%)))
uninstall:
	for h in $(PUBLIC_HEADERS:include/%=%); do \
		rm -f $(DESTDIR)$(INCLUDEDIR)/$$h || exit 1; \
	done
	rm -f $(DESTDIR)$(LIBDIR)/libtally.a $(DESTDIR)$(LIBDIR)/$(SO_FILE) \
		$(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libtally.so \
		$(DESTDIR)$(LIBDIR)/pkgconfig/tally.pc $(DESTDIR)$(BINDIR)/tally
	for d in $(shell printf '%s\n' $(UNINSTALL_DIRS) | sort -r -u); do \
		if [ -d "$$d" ] && [ -z "$$(ls -A "$$d")" ]; then \
			rmdir "$$d" || exit 1; \
		fi; \
	done

clean:
	rm -rf build
