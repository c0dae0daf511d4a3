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
# LIBDIR relative to BINDIR: where `tally run` finds its preload from its
# own binary, wherever the prefix is (cli/run.c).
BINDIR_TO_LIBDIR := $(shell realpath -m --relative-to="$(BINDIR)" "$(LIBDIR)")
OPT ?= -O2 -g
SAN ?=
CFLAGS_ALL = -std=gnu11 -fPIC -pthread -mcx16 $(OPT) $(SAN) $(WARN) -Iinclude -Isrc \
	-DTALLY_LIBDIR='"$(LIBDIR)"' \
	-DTALLY_BINDIR_TO_LIBDIR='"$(BINDIR_TO_LIBDIR)"' $(JE_CFLAGS) $(CFLAGS)
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
ifeq ($(HTTP)$(HAVE_MHD)$(origin HTTP),nofile)
$(info make: skipping the HTTP endpoint (libtally_http): no <microhttpd.h>; \
install Debian's libmicrohttpd-dev to build it, or set HTTP=no)
endif
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

# libtally: one folder per concept under src/ (src/README.md gives the
# layers); src/http and src/jemalloc are libraries of their own.
LIB_SRC := $(filter-out src/http/% src/jemalloc/%,$(wildcard src/*/*.c))
# The jemalloc integration (tally/jemalloc.h): its own libraries, so that
# libtally never depends on jemalloc, and the preload library of
# `tally run` (libtally_jemalloc and libtally inside, exporting nothing).
# Built when jemalloc's header is found (Debian: libjemalloc-dev);
# JEMALLOC=no leaves it out, JEMALLOC=yes insists (make test does).
# Another jemalloc than the system's: JEMALLOC_DIR is its installation
# prefix (include/, lib/), for example one built with a symbol prefix
# (JEMALLOC_PREFIX=je_, as services that bundle their own jemalloc build
# it); the integration then calls je_mallctl() and the like (jemalloc.h's
# JEMALLOC_MANGLE), and `tally run`, whose preload needs a jemalloc that
# replaces malloc(), is not built.
JEMALLOC_DIR ?=
JEMALLOC_PREFIX ?=
JE_CFLAGS := $(if $(JEMALLOC_DIR),-I$(JEMALLOC_DIR)/include) \
	$(if $(JEMALLOC_PREFIX),-DJEMALLOC_MANGLE)
HAVE_JEMALLOC := $(shell printf '\043include <jemalloc/jemalloc.h>\n' | \
	$(CC) $(JE_CFLAGS) -E -x c - >/dev/null 2>&1 && echo yes)
JEMALLOC ?= $(if $(HAVE_JEMALLOC),yes,no)
ifeq ($(JEMALLOC)$(HAVE_JEMALLOC)$(origin JEMALLOC),nofile)
$(info make: skipping the jemalloc integration (libtally_jemalloc, \
tally run): no <jemalloc/jemalloc.h>; install Debian's libjemalloc-dev \
to build it, or set JEMALLOC=no)
endif
JE_HEADERS := include/tally/jemalloc.h
JE_SO_FILE := libtally_jemalloc.so.$(VERSION)
JE_SONAME := libtally_jemalloc.so.0
JE_OBJ := $(BUILD)/obj/src/jemalloc/tally_jemalloc.o \
	$(BUILD)/obj/src/jemalloc/tally_jemalloc_hooks.o
RUN_OBJ := $(BUILD)/obj/src/jemalloc/run_alloc.o $(BUILD)/obj/cli/run_ledger.o \
	$(BUILD)/obj/cli/run_preload.o
JE_DIR_LIBS := -L$(JEMALLOC_DIR)/lib -Wl,-rpath,$(JEMALLOC_DIR)/lib
JE_LIBS := $(if $(JEMALLOC_DIR),$(JE_DIR_LIBS)) -ljemalloc
JE_TEST_SRC := $(wildcard tests/jemalloc/*.c)
JE_TEST_BIN := $(JE_TEST_SRC:tests/jemalloc/%.c=$(BUILD)/tests/%)
# Plain programs (no tally inside) that scripts/check-run.sh runs under
# `tally run`; the static one is refused, the unpreload one drops the
# preload before it can report (and is killed).
RUN_PROBES := $(BUILD)/tests/run/run_probe $(BUILD)/tests/run/run_probe_static \
	$(BUILD)/tests/run/run_probe_unpreload
ifneq ($(JEMALLOC_PREFIX),)
RUN_PROBES :=
endif
ifeq ($(JEMALLOC),yes)
JE_FILES := jemalloc
else
JE_FILES :=
JE_TEST_BIN :=
RUN_PROBES :=
endif
# The headers from C++ (tests/cxx/test_cxx.cc): a C++17 program of their
# inline fast paths, built by $(CXX) (g++) as a C++ user builds one, with
# the public headers and libtally.a; scripts/check-cxx.sh runs it.  Built
# when $(CXX) runs (make test installs g++).
HAVE_CXX := $(shell $(CXX) --version >/dev/null 2>&1 && echo yes)
ifneq ($(HAVE_CXX),yes)
$(info make: skipping the C++ test (tests/cxx): no $(CXX); install Debian's \
g++ to build it)
endif
CXX_WARN := -Wall -Wextra -pedantic -Werror
CXX_TEST_BIN := $(if $(HAVE_CXX),$(BUILD)/tests/cxx/test_cxx)
# operator new at a limit under `tally run` (tests/run/new_probe.cc).
RUN_PROBES += $(if $(HAVE_CXX),$(if $(RUN_PROBES),$(BUILD)/tests/run/new_probe))
BENCH_SRC := $(wildcard bench/*.c)
# cli/run_preload.c is `tally run`'s preload library, not the tool's.
CLI_SRC := $(filter-out cli/run_preload.c,$(wildcard cli/*.c))
# The tool's helpers that cli/ and bench/ share (option parsing, the
# machine's description); cli/ reaches bench/ only through bench/bench.h.
TOOL_SRC := $(wildcard tool/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_SUPPORT := $(filter-out $(TEST_SRC),$(wildcard tests/*.c))
EXAMPLE_SRC := $(wildcard examples/*.c)
# The endpoint's test and examples (examples/http_*.c) need libtally_http.
ifneq ($(HTTP),yes)
TEST_SRC := $(filter-out tests/test_export_http.c,$(TEST_SRC))
EXAMPLE_SRC := $(filter-out examples/http_%,$(EXAMPLE_SRC))
endif
# The integration's example needs libtally_jemalloc.
ifneq ($(JEMALLOC),yes)
EXAMPLE_SRC := $(filter-out examples/tenant_server.c,$(EXAMPLE_SRC))
endif
PUBLIC_HEADERS := $(wildcard include/tally/*.h include/tally/*/*.h)
# Without the endpoint's library its header is not installed either.
INSTALL_HEADERS := $(filter-out $(if $(filter yes,$(HTTP)),,$(HTTP_HEADERS)) \
	$(if $(filter yes,$(JEMALLOC)),,$(JE_HEADERS)),$(PUBLIC_HEADERS))
HEADERS := $(PUBLIC_HEADERS) \
	$(wildcard src/*/*.h bench/*.h tests/*.h cli/*.h)

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
LIB_INTERNAL := $(BUILD)/obj/libtally_internal.a
LD ?= ld
OBJCOPY ?= objcopy
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TOOL_OBJ := $(TOOL_SRC:%.c=$(BUILD)/obj/%.o)
HEADERS += $(wildcard tool/*.h)
# The statistics tree's comparison designs live with the benchmark (on an
# internal hook of the static library); the tests that compare designs
# link them too.
SUPPORT_OBJ := $(TEST_SUPPORT:%.c=$(BUILD)/obj/%.o) \
	$(BUILD)/obj/bench/stats_designs.o
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
SO_LINKS := $(BUILD)/$(SONAME) $(BUILD)/libtally.so

.PHONY: all lib http jemalloc tests examples test check demo docs install \
	uninstall clean deps print-build
# Keep the test objects make sees as intermediate: no relink every run.
.SECONDARY:
.DEFAULT_GOAL := all

all: deps lib $(BUILD)/tally tests examples

deps:
	@sh scripts/ensure-deps.sh build

lib: $(BUILD)/libtally.a $(BUILD)/$(SO_FILE) $(SO_LINKS) $(HTTP_FILES) \
	$(JE_FILES)

http: $(HTTP_LIB_FILES)

jemalloc: $(BUILD)/libtally_jemalloc.a $(BUILD)/$(JE_SO_FILE) \
	$(BUILD)/$(JE_SONAME) $(BUILD)/libtally_jemalloc.so \
	$(if $(JEMALLOC_PREFIX),,$(BUILD)/libtally_run.so)

tests: $(TEST_BIN) $(if $(SAN),,$(JE_TEST_BIN) $(RUN_PROBES) $(CXX_TEST_BIN))

examples: $(EXAMPLE_BIN)

$(BUILD)/obj/%.o: %.c $(HEADERS) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

# The installed static library: one relocatable object in which only the
# tally_ symbols stay global, so that the library's internal names
# (names_insert, grace_poll, ...) cannot clash with a program that links
# it statically.  The tests and the tool, which reach internals, link
# LIB_INTERNAL: the same objects as they are.
$(BUILD)/libtally.a: $(LIB_OBJ)
	@rm -f $@ $(BUILD)/obj/libtally.o
	$(LD) -r -o $(BUILD)/obj/libtally.o $^
	$(OBJCOPY) --wildcard --keep-global-symbol='tally_*' \
		$(BUILD)/obj/libtally.o
	ar rcs $@ $(BUILD)/obj/libtally.o

$(LIB_INTERNAL): $(LIB_OBJ)
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

$(BUILD)/tally_jemalloc.map: $(PUBLIC_HEADERS) scripts/gen-exports.sh
	@mkdir -p $(dir $@)
	CC="$(CC)" sh scripts/gen-exports.sh map jemalloc > $@.tmp
	@mv $@.tmp $@

$(BUILD)/libtally_jemalloc.a: $(JE_OBJ)
	@rm -f $@
	ar rcs $@ $^

# libtally_jemalloc: real file, soname and link-time name, as libtally's;
# it needs libtally.so.0 (one copy of tally, one current group per
# thread), found beside it.
$(BUILD)/$(JE_SO_FILE): $(JE_OBJ) $(BUILD)/tally_jemalloc.map \
		$(BUILD)/libtally.so
	$(CC) -shared -Wl,-soname,$(JE_SONAME) \
		-Wl,--version-script,$(BUILD)/tally_jemalloc.map \
		-Wl,--no-undefined-version -Wl,-rpath,'$$ORIGIN' \
		-o $@ $(JE_OBJ) -L$(BUILD) -ltally $(JE_LIBS) $(LDFLAGS_ALL)

$(BUILD)/$(JE_SONAME): $(BUILD)/$(JE_SO_FILE)
	ln -sf $(JE_SO_FILE) $@

$(BUILD)/libtally_jemalloc.so: $(BUILD)/$(JE_SONAME)
	ln -sf $(JE_SONAME) $@

# run_preload.o last: its constructor installs the integration, whose
# fork handler must be registered after libtally's (their constructors
# run first, in link order).
$(BUILD)/libtally_run.so: $(RUN_OBJ) $(JE_OBJ) $(BUILD)/libtally.a
	$(CC) -shared -Wl,--version-script,cli/run_preload.map \
		-Wl,--exclude-libs,ALL -o $@ $(JE_OBJ) $(BUILD)/libtally.a \
		$(RUN_OBJ) $(JE_LIBS) $(LDFLAGS_ALL) $(LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/jemalloc/%.o $(SUPPORT_OBJ) \
		$(BUILD)/libtally_jemalloc.a $(LIB_INTERNAL)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(SUPPORT_OBJ) $(BUILD)/libtally_jemalloc.a \
		$(LIB_INTERNAL) $(JE_LIBS) $(LDFLAGS_ALL) $(LIBS) -ldl

$(BUILD)/tests/run/run_probe: tests/run/run_probe.c Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) $(WARN) -o $@ $< -pthread

$(BUILD)/tests/run/run_probe_static: tests/run/run_probe.c Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) $(WARN) -static -o $@ $< -pthread

$(BUILD)/tests/run/run_probe_unpreload: tests/run/run_probe.c Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) $(WARN) -DRUN_PROBE_UNPRELOAD -o $@ $< -pthread

$(BUILD)/tests/run/new_probe: tests/run/new_probe.cc Makefile
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 $(OPT) $(CXX_WARN) -o $@ $< -pthread

$(BUILD)/tally: $(CLI_OBJ) $(BENCH_OBJ) $(TOOL_OBJ) $(LIB_INTERNAL)
	$(CC) -o $@ $(CLI_OBJ) $(BENCH_OBJ) $(TOOL_OBJ) $(LIB_INTERNAL) \
		$(LDFLAGS_ALL) $(LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(SUPPORT_OBJ) $(LIB_INTERNAL)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(SUPPORT_OBJ) $(LIB_INTERNAL) $(LDFLAGS_ALL) $(LIBS)

$(BUILD)/tests/test_export_http: $(BUILD)/obj/tests/test_export_http.o \
		$(SUPPORT_OBJ) $(BUILD)/libtally_http.a $(LIB_INTERNAL)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(SUPPORT_OBJ) $(BUILD)/libtally_http.a \
		$(LIB_INTERNAL) $(LDFLAGS_ALL) $(HTTP_LIBS) $(LIBS)

# layout.o: the C compiler's view of the types the C++ program compares.
$(BUILD)/tests/cxx/test_cxx: tests/cxx/test_cxx.cc tests/cxx/layout.h \
		tests/harness.h $(BUILD)/obj/tests/cxx/layout.o \
		$(BUILD)/obj/tests/harness.o $(BUILD)/libtally.a \
		$(PUBLIC_HEADERS) Makefile
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 $(OPT) $(SAN) $(CXX_WARN) -Iinclude -Itests -o $@ $< \
		$(BUILD)/obj/tests/cxx/layout.o $(BUILD)/obj/tests/harness.o \
		$(BUILD)/libtally.a $(LDFLAGS_ALL) $(LIBS)

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

# The example of the jemalloc integration links it (and jemalloc: its
# malloc is jemalloc's).
$(BUILD)/examples/tenant_server: examples/tenant_server.c $(PUBLIC_HEADERS) \
		$(BUILD)/libtally_jemalloc.a $(BUILD)/libtally.a Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) $(SAN) $(WARN) -Iinclude -o $@ $< \
		$(BUILD)/libtally_jemalloc.a $(BUILD)/libtally.a $(JE_LIBS) \
		$(LDFLAGS_ALL) $(LIBS)

# Every test, four builds: plain, fault injection, ASan+UBSan, TSan.
# TALLY_INJECT compiles the hook points of src/runtime/inject.h in (the inject and
# ASan builds), so the tests can preempt, migrate or signal a thread at the
# point where it matters, or make a system call fail.  TALLY_DEBUG keeps
# destroyed stats groups poisoned, so an update after destroy aborts instead
# of touching freed memory.  TSan does not model stand-alone fences
# (-Wno-tsan): tally uses them for store-load ordering on the simulated and
# no-membarrier paths, never for happens-before.  The runner also runs the
# examples, scripts/check-exports.sh, scripts/check-cli.sh (the tool),
# scripts/check-top.sh (tally top), scripts/check-docs.sh (docs/API.md
# and the tool's output in the docs up to date, every function's Context),
# scripts/check-readme.sh (the docs' programs compile and run) and
# scripts/check-prometheus.sh (a real Prometheus server scrapes
# examples/http_endpoint.c), scripts/check-rust.sh (the Rust bindings of
# bindings/rust, compiled before the runner starts, into
# ~/.cache/tally/cargo-target), and prints the closing "N passed, N
# failed" line.  The packages it needs are named, then installed, by
# scripts/ensure-deps.sh; promtool and the Prometheus server are only
# unpacked into build/tools, never installed.
test: deps
	@sh scripts/ensure-deps.sh test build/tools
	$(MAKE) --no-print-directory BUILD=build HTTP=yes JEMALLOC=yes lib tests examples \
		build/tally
	$(MAKE) --no-print-directory BUILD=build/inject HTTP=yes JEMALLOC=yes OPT="-O2 -g" \
		SAN="-DTALLY_INJECT -DTALLY_DEBUG" tests
	$(MAKE) --no-print-directory BUILD=build/asan HTTP=yes JEMALLOC=yes OPT="-O1 -g" \
		SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -DTALLY_DEBUG -DTALLY_INJECT" tests
	$(MAKE) --no-print-directory BUILD=build/tsan HTTP=yes JEMALLOC=yes OPT="-O1 -g" \
		SAN="-fsanitize=thread -Wno-tsan" tests
	@sh scripts/check-rust.sh --build
	@sh scripts/run-tests.sh

check: test

# libtally's sources and the flags make compiles them with, one a line
# ("cflag -O2", "src src/counter/counter.c", "lib -lm"): the Rust
# bindings' build (bindings/rust/tally-sys/build.rs) compiles the same
# sources with the same flags from this list.
print-build:
	@printf 'cflag %s\n' $(CFLAGS_ALL)
	@printf 'src %s\n' $(LIB_SRC)
	@printf 'lib %s\n' $(LIBS)

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
demo: deps
	@sh scripts/ensure-deps.sh demo
	$(MAKE) --no-print-directory JEMALLOC=yes all
	@mkdir -p $(DEMO)
	$(BUILD)/tally bench counter --json $(DEMO)/counter.json
	$(BUILD)/tally bench stats --json $(DEMO)/stats.json
	$(BUILD)/tally bench oom --json $(DEMO)/oom.json
	$(BUILD)/tally bench export --json $(DEMO)/export.json
	$(BUILD)/tally bench charge --json $(DEMO)/charge.json
	$(BUILD)/tally bench malloc --json $(DEMO)/malloc.json
	$(BUILD)/tally bench churn --queries 1000000 --json $(DEMO)/churn.json
	$(BUILD)/tally bench scale --json $(DEMO)/scale.json
	rm -rf $(DEMO)/plots
	for b in counter stats oom export charge malloc; do \
		$(BUILD)/tally plot $(DEMO)/$$b.json -o $(DEMO)/plots || exit 1; \
	done
	@echo "plots: $(DEMO)/plots/index.html"

# --- fuzzing ---------------------------------------------------------------
# The libFuzzer harnesses of tests/fuzz (every parser of untrusted input:
# tally top's exposition and URL, tally plot's JSON, the HTTP endpoint's
# Accept header, the tool's options, group names), built by clang-14 with
# ASan and UBSan into build/fuzz; the rest of the build stays gcc's.
# `make fuzz` runs each for FUZZ_SECONDS (120) from its corpus,
# tests/fuzz/corpus/NAME, keeping new inputs in build/fuzz/corpus/NAME
# and what fails in build/fuzz/found/NAME; `make fuzz-replay` (and make
# test, through scripts/check-fuzz.sh) replays the corpus and fuzzes
# each for 5 seconds.
FUZZ_CC ?= clang-14
FUZZ_SECONDS ?= 120
FUZZ_CFLAGS := -std=gnu11 -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-Iinclude -Isrc -Icli -Itool -Itests/fuzz $(WARN)
FUZZ_NAMES := top_parse top_url json args names $(if $(filter yes,$(HTTP)),accept)
FUZZ_BIN := $(FUZZ_NAMES:%=build/fuzz/fuzz_%)
# What each harness compiles besides itself (fuzz_accept includes
# src/http/export_http.c, whose parser is static).
TOP_PARTS := cli/top_parse.c cli/top_model.c cli/top_index.c \
	cli/top_source.c cli/top_text.c cli/top_render.c
FUZZ_PARTS_top_parse := $(TOP_PARTS)
FUZZ_PARTS_top_url := $(TOP_PARTS)
FUZZ_PARTS_json := cli/json_read.c
FUZZ_PARTS_args := tool/args.c
FUZZ_PARTS_names := src/names/names.c
FUZZ_LIBS_accept := $(HTTP_LIBS)

.PHONY: fuzzers fuzz fuzz-replay
fuzzers: $(FUZZ_BIN)

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(TOP_PARTS) \
		cli/json_read.c tool/args.c src/names/names.c $(HTTP_SRC) \
		$(HEADERS) build/libtally.a Makefile
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_PARTS_$*) build/libtally.a \
		$(FUZZ_LIBS_$*) -lm -pthread

fuzz: $(FUZZ_BIN)
	FUZZ_SECONDS=$(FUZZ_SECONDS) sh scripts/check-fuzz.sh

fuzz-replay: $(FUZZ_BIN)
	FUZZ_SECONDS=5 sh scripts/check-fuzz.sh

# Headers keep their directories (include/tally/arch/...).  No ldconfig:
# DESTDIR installs are staged; the symlinks are made here instead.
# LIBDIR (e.g. $(PREFIX)/lib64 or /usr/lib/x86_64-linux-gnu), INCLUDEDIR
# and BINDIR may be set apart from PREFIX; the pkg-config files (tally.pc,
# tally_http.pc, tally_jemalloc.pc: the libraries' names) name them.
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
	for pc in tally $(if $(filter yes,$(HTTP)),tally_http) \
		$(if $(filter yes,$(JEMALLOC)),tally_jemalloc); do \
		sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
			-e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
			-e 's|@VERSION@|$(VERSION)|' \
			$$pc.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/$$pc.pc || exit 1; \
	done
ifeq ($(JEMALLOC),yes)
	install -m 644 $(BUILD)/libtally_jemalloc.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/$(JE_SO_FILE) $(DESTDIR)$(LIBDIR)/
	ln -sf $(JE_SO_FILE) $(DESTDIR)$(LIBDIR)/$(JE_SONAME)
	ln -sf $(JE_SONAME) $(DESTDIR)$(LIBDIR)/libtally_jemalloc.so
ifeq ($(JEMALLOC_PREFIX),)
	install -d $(DESTDIR)$(LIBDIR)/tally
	install -m 755 $(BUILD)/libtally_run.so $(DESTDIR)$(LIBDIR)/tally/
endif
endif
ifeq ($(HTTP),yes)
	install -m 644 $(BUILD)/libtally_http.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/$(HTTP_SO_FILE) $(DESTDIR)$(LIBDIR)/
	ln -sf $(HTTP_SO_FILE) $(DESTDIR)$(LIBDIR)/$(HTTP_SONAME)
	ln -sf $(HTTP_SONAME) $(DESTDIR)$(LIBDIR)/libtally_http.so
endif

# What install put there, with the same variables, and the directories of
# tally's own headers (include/tally and below) when left empty, deepest
# first.  The directories it shares with others (bin, lib, lib/pkgconfig,
# include) stay, even empty: they are the system's.  No error either way.
UNINSTALL_DIRS := $(patsubst %/,%,$(dir \
	$(PUBLIC_HEADERS:include/%=$(DESTDIR)$(INCLUDEDIR)/%))) \
	$(DESTDIR)$(LIBDIR)/tally
uninstall:
	for h in $(PUBLIC_HEADERS:include/%=%); do \
		rm -f $(DESTDIR)$(INCLUDEDIR)/$$h || exit 1; \
	done
	rm -f $(DESTDIR)$(LIBDIR)/libtally.a $(DESTDIR)$(LIBDIR)/$(SO_FILE) \
		$(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libtally.so \
		$(DESTDIR)$(LIBDIR)/pkgconfig/tally.pc $(DESTDIR)$(BINDIR)/tally \
		$(DESTDIR)$(LIBDIR)/libtally_jemalloc.a \
		$(DESTDIR)$(LIBDIR)/$(JE_SO_FILE) \
		$(DESTDIR)$(LIBDIR)/$(JE_SONAME) \
		$(DESTDIR)$(LIBDIR)/libtally_jemalloc.so \
		$(DESTDIR)$(LIBDIR)/tally/libtally_run.so \
		$(DESTDIR)$(LIBDIR)/pkgconfig/tally_jemalloc.pc
	rm -f $(DESTDIR)$(LIBDIR)/libtally_http.a \
		$(DESTDIR)$(LIBDIR)/$(HTTP_SO_FILE) \
		$(DESTDIR)$(LIBDIR)/$(HTTP_SONAME) \
		$(DESTDIR)$(LIBDIR)/libtally_http.so \
		$(DESTDIR)$(LIBDIR)/pkgconfig/tally_http.pc
	for d in $(shell printf '%s\n' $(UNINSTALL_DIRS) | sort -r -u); do \
		if [ -d "$$d" ] && [ -z "$$(ls -A "$$d")" ]; then \
			rmdir "$$d" || exit 1; \
		fi; \
	done

clean:
	rm -rf build
