# tally - top-level build.  `make` builds the library (and libtally_http,
# the HTTP endpoint, when libmicrohttpd is there), the tests, the examples
# and the command-line tool into build/; `make test` runs every test in a
# plain, a fault-injection, an ASan+UBSan and a TSan build, the examples,
# checks the shared libraries' exports and installation, and has a real
# Prometheus server scrape the HTTP endpoint; `make demo` runs the
# reference benchmarks; `make docs` regenerates docs/API.md from the
# headers and the tool's output shown in the docs.

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
CFLAGS_ALL := -std=gnu11 -fPIC -pthread -mcx16 $(OPT) $(SAN) $(WARN) -Iinclude -Isrc \
	$(CFLAGS)
LDFLAGS_ALL := -pthread $(SAN) $(LDFLAGS)
LIBS := -lm

# The HTTP endpoint (tally/export_http.h) is an optional component with its
# own library, libtally_http, on libmicrohttpd: libtally never depends on
# it.  Built when libmicrohttpd's header is found (Debian:
# libmicrohttpd-dev); HTTP=no leaves it out, HTTP=yes insists (make test
# does).
HAVE_MHD := $(shell printf '\043include <microhttpd.h>\n' | \
	$(CC) -E -x c - >/dev/null 2>&1 && echo yes)
HTTP ?= $(if $(HAVE_MHD),yes,no)
HTTP_LIBS := -lmicrohttpd
HTTP_SRC := $(wildcard src/http/*.c)
HTTP_OBJ := $(HTTP_SRC:%.c=$(BUILD)/obj/%.o)
HTTP_SO_FILE := libtally_http.so.$(VERSION)
HTTP_SONAME := libtally_http.so.0
HTTP_SO_LINKS := $(BUILD)/$(HTTP_SONAME) $(BUILD)/libtally_http.so
HTTP_LIB_FILES := $(BUILD)/libtally_http.a $(BUILD)/$(HTTP_SO_FILE) \
	$(HTTP_SO_LINKS)
ifeq ($(HTTP),yes)
HTTP_FILES := $(HTTP_LIB_FILES)
else
HTTP_FILES :=
endif
HTTP_HEADERS := include/tally/export_http.h

LIB_SRC := $(wildcard src/*.c)
BENCH_SRC := $(wildcard bench/*.c)
CLI_SRC := $(wildcard cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_SUPPORT := $(filter-out $(TEST_SRC),$(wildcard tests/*.c))
EXAMPLE_SRC := $(wildcard examples/*.c)
# The endpoint's test and examples (examples/http_*.c) need libtally_http.
ifneq ($(HTTP),yes)
TEST_SRC := $(filter-out tests/test_export_http.c,$(TEST_SRC))
EXAMPLE_SRC := $(filter-out examples/http_%,$(EXAMPLE_SRC))
endif
PUBLIC_HEADERS := $(wildcard include/tally/*.h include/tally/*/*.h)
# Without the endpoint's library its header is not installed either.
INSTALL_HEADERS := $(if $(filter yes,$(HTTP)),$(PUBLIC_HEADERS),\
	$(filter-out $(HTTP_HEADERS),$(PUBLIC_HEADERS)))
HEADERS := $(PUBLIC_HEADERS) \
	$(wildcard src/*.h src/http/*.h bench/*.h tests/*.h cli/*.h)

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
# The statistics tree's comparison designs live with the benchmark (on an
# internal hook of the static library); the tests that compare designs
# link them too.
SUPPORT_OBJ := $(TEST_SUPPORT:%.c=$(BUILD)/obj/%.o) \
	$(BUILD)/obj/bench/stats_designs.o
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
SO_LINKS := $(BUILD)/$(SONAME) $(BUILD)/libtally.so

.PHONY: all lib http tests examples test check demo docs install uninstall \
	clean deps
# Keep the test objects make sees as intermediate: no relink every run.
.SECONDARY:
.DEFAULT_GOAL := all

all: deps lib $(BUILD)/tally tests examples

deps:
	@sh scripts/ensure-deps.sh build

lib: $(BUILD)/libtally.a $(BUILD)/$(SO_FILE) $(SO_LINKS) $(HTTP_FILES)

http: $(HTTP_LIB_FILES)

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
	CC="$(CC)" sh scripts/gen-exports.sh map tally > $@.tmp
	@mv $@.tmp $@

$(BUILD)/tally_http.map: $(PUBLIC_HEADERS) scripts/gen-exports.sh
	@mkdir -p $(dir $@)
	CC="$(CC)" sh scripts/gen-exports.sh map tally_http > $@.tmp
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

# libtally_http: the endpoint alone, on libtally's public API (linked
# against libtally.so) and libmicrohttpd; exports export_http.h.
$(BUILD)/libtally_http.a: $(HTTP_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/$(HTTP_SO_FILE): $(HTTP_OBJ) $(BUILD)/tally_http.map \
		$(BUILD)/libtally.so
	$(CC) -shared -Wl,-soname,$(HTTP_SONAME) \
		-Wl,--version-script,$(BUILD)/tally_http.map \
		-Wl,--no-undefined-version \
		$(if $(findstring -fsanitize,$(SAN)),,-Wl,-z,defs) \
		-o $@ $(HTTP_OBJ) -L$(BUILD) -ltally $(LDFLAGS_ALL) $(HTTP_LIBS)

$(BUILD)/$(HTTP_SONAME): $(BUILD)/$(HTTP_SO_FILE)
	ln -sf $(HTTP_SO_FILE) $@

$(BUILD)/libtally_http.so: $(BUILD)/$(HTTP_SONAME)
	ln -sf $(HTTP_SONAME) $@

$(BUILD)/tally: $(CLI_OBJ) $(BENCH_OBJ) $(BUILD)/libtally.a
	$(CC) -o $@ $(CLI_OBJ) $(BENCH_OBJ) $(BUILD)/libtally.a $(LDFLAGS_ALL) $(LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(SUPPORT_OBJ) $(BUILD)/libtally.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(SUPPORT_OBJ) $(BUILD)/libtally.a $(LDFLAGS_ALL) $(LIBS)

$(BUILD)/tests/test_export_http: $(BUILD)/obj/tests/test_export_http.o \
		$(SUPPORT_OBJ) $(BUILD)/libtally_http.a $(BUILD)/libtally.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(SUPPORT_OBJ) $(BUILD)/libtally_http.a \
		$(BUILD)/libtally.a $(LDFLAGS_ALL) $(HTTP_LIBS) $(LIBS)

# The examples are what a user writes: public headers only, no -Isrc, and
# ISO C11 (no GNU extension the headers would need the user to enable).
$(BUILD)/examples/%: examples/%.c $(PUBLIC_HEADERS) $(BUILD)/libtally.a Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) $(SAN) $(WARN) -Iinclude -o $@ $< \
		$(BUILD)/libtally.a $(LDFLAGS_ALL) $(LIBS)

$(BUILD)/examples/http_%: examples/http_%.c $(PUBLIC_HEADERS) \
		$(BUILD)/libtally_http.a $(BUILD)/libtally.a Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) $(SAN) $(WARN) -Iinclude -o $@ $< \
		$(BUILD)/libtally_http.a $(BUILD)/libtally.a $(LDFLAGS_ALL) \
		$(HTTP_LIBS) $(LIBS)

# Every test, four builds: plain, fault injection, ASan+UBSan, TSan.
# TALLY_INJECT compiles the hook points of src/inject.h in (the inject and
# ASan builds), so the tests can preempt, migrate or signal a thread at the
# point where it matters, or make a system call fail.  TALLY_DEBUG keeps
# destroyed stats groups poisoned, so an update after destroy aborts instead
# of touching freed memory.  TSan does not model stand-alone fences
# (-Wno-tsan): tally uses them for store-load ordering on the simulated and
# no-membarrier paths, never for happens-before.  The runner also runs the
# examples, scripts/check-exports.sh, scripts/check-cli.sh (the tool),
# scripts/check-docs.sh (docs/API.md and the tool's output in the docs up
# to date, every function's Context), scripts/check-readme.sh (the docs'
# programs compile and run) and scripts/check-prometheus.sh (a real
# Prometheus server scrapes examples/http_endpoint.c), and prints the
# closing "N passed, N failed" line.  The packages it needs are named,
# then installed, by scripts/ensure-deps.sh; promtool and the Prometheus
# server are only unpacked into build/tools, never installed.
test: deps
	@sh scripts/ensure-deps.sh test build/tools
	$(MAKE) --no-print-directory BUILD=build HTTP=yes lib tests examples \
		build/tally
	$(MAKE) --no-print-directory BUILD=build/inject HTTP=yes OPT="-O2 -g" \
		SAN="-DTALLY_INJECT -DTALLY_DEBUG" tests
	$(MAKE) --no-print-directory BUILD=build/asan HTTP=yes OPT="-O1 -g" \
		SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -DTALLY_DEBUG -DTALLY_INJECT" tests
	$(MAKE) --no-print-directory BUILD=build/tsan HTTP=yes OPT="-O1 -g" \
		SAN="-fsanitize=thread -Wno-tsan" tests
	@sh scripts/run-tests.sh

check: test

# The API reference, generated from the headers' comments, and the
# samples of the tool's output in README.md and docs/*.md, generated by
# running it (scripts/gen-cli-docs.sh); `make test` (scripts/check-docs.sh)
# fails when the committed copies are stale.
docs: $(BUILD)/tally
	sh scripts/gen-api-docs.sh > docs/API.md.tmp || \
		{ rm -f docs/API.md.tmp; exit 1; }
	@mv docs/API.md.tmp docs/API.md
	sh scripts/gen-cli-docs.sh -i $(BUILD)/tally README.md \
		$(filter-out docs/API.md,$(wildcard docs/*.md))

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
	for h in $(INSTALL_HEADERS:include/%=%); do \
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
ifeq ($(HTTP),yes)
	install -m 644 $(BUILD)/libtally_http.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/$(HTTP_SO_FILE) $(DESTDIR)$(LIBDIR)/
	ln -sf $(HTTP_SO_FILE) $(DESTDIR)$(LIBDIR)/$(HTTP_SONAME)
	ln -sf $(HTTP_SONAME) $(DESTDIR)$(LIBDIR)/libtally_http.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
		-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' \
		tally_http.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/tally_http.pc
endif

# What install put there, with the same variables; directories that are
# left empty are removed (never one that still holds something else).
uninstall:
	for h in $(PUBLIC_HEADERS:include/%=%); do \
		rm -f $(DESTDIR)$(INCLUDEDIR)/$$h || exit 1; \
	done
	rm -f $(DESTDIR)$(LIBDIR)/libtally.a $(DESTDIR)$(LIBDIR)/$(SO_FILE) \
		$(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libtally.so \
		$(DESTDIR)$(LIBDIR)/pkgconfig/tally.pc $(DESTDIR)$(BINDIR)/tally
	rm -f $(DESTDIR)$(LIBDIR)/libtally_http.a \
		$(DESTDIR)$(LIBDIR)/$(HTTP_SO_FILE) \
		$(DESTDIR)$(LIBDIR)/$(HTTP_SONAME) \
		$(DESTDIR)$(LIBDIR)/libtally_http.so \
		$(DESTDIR)$(LIBDIR)/pkgconfig/tally_http.pc
	-rmdir -p $(sort $(dir $(PUBLIC_HEADERS:include/%=$(DESTDIR)$(INCLUDEDIR)/%))) \
		$(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(BINDIR) 2>/dev/null

clean:
	rm -rf build
