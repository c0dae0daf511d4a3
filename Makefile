# tally - top-level build.  `make` builds the library, the tests and the
# command-line tool into build/; `make test` runs every test in a plain, an
# ASan+UBSan and a TSan build; `make demo` runs the reference benchmarks.

PREFIX ?= /usr/local
BUILD ?= build
CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif

VERSION := 0.1.0
WARN := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wpointer-arith -Wcast-align -Wwrite-strings -Wundef -Wvla \
	-Wformat=2 -Wno-unused-parameter
ifneq ($(CI),)
WARN += -Werror
endif
OPT ?= -O2 -g
SAN ?=
CFLAGS_ALL := -std=gnu11 -fPIC -pthread $(OPT) $(SAN) $(WARN) -Iinclude -Isrc \
	-DTALLY_VERSION='"$(VERSION)"' $(CFLAGS)
LDFLAGS_ALL := -pthread $(SAN) $(LDFLAGS)
LIBS := -lm

LIB_SRC := $(wildcard src/*.c)
BENCH_SRC := $(wildcard bench/*.c)
CLI_SRC := $(wildcard cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
TEST_SUPPORT := $(filter-out $(TEST_SRC),$(wildcard tests/*.c))
HEADERS := $(wildcard include/tally/*.h src/*.h bench/*.h tests/*.h cli/*.h)

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
SUPPORT_OBJ := $(TEST_SUPPORT:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all lib tests test demo install clean deps
# Keep the test objects make sees as intermediate: no relink every run.
.SECONDARY:
.DEFAULT_GOAL := all

all: deps lib $(BUILD)/tally tests

deps:
	@sh scripts/ensure-deps.sh build

lib: $(BUILD)/libtally.a $(BUILD)/libtally.so

tests: $(TEST_BIN)

$(BUILD)/obj/%.o: %.c $(HEADERS) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/libtally.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libtally.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libtally.so.0 -o $@ $^ $(LDFLAGS_ALL) $(LIBS)

$(BUILD)/tally: $(CLI_OBJ) $(BENCH_OBJ) $(BUILD)/libtally.a
	$(CC) -o $@ $(CLI_OBJ) $(BENCH_OBJ) $(BUILD)/libtally.a $(LDFLAGS_ALL) $(LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(SUPPORT_OBJ) $(BUILD)/libtally.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(SUPPORT_OBJ) $(BUILD)/libtally.a $(LDFLAGS_ALL) $(LIBS)

# Every test, three builds: plain, ASan+UBSan, TSan.  The ASan build also
# defines TALLY_DEBUG: destroyed stats groups stay poisoned, so an update
# after destroy aborts instead of touching freed memory.  TSan does not model
# stand-alone fences (-Wno-tsan): tally uses them for store-load ordering on
# the simulated and no-membarrier paths, never for happens-before.  The
# runner prints the closing "N passed, N failed" line.
test: deps
	@sh scripts/ensure-deps.sh test
	$(MAKE) --no-print-directory BUILD=build tests
	$(MAKE) --no-print-directory BUILD=build/asan OPT="-O1 -g" \
		SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -DTALLY_DEBUG" tests
	$(MAKE) --no-print-directory BUILD=build/tsan OPT="-O1 -g" \
		SAN="-fsanitize=thread -Wno-tsan" tests
	@sh scripts/run-tests.sh

demo: all
	$(BUILD)/tally bench counter
	$(BUILD)/tally bench stats

install: lib
	install -d $(DESTDIR)$(PREFIX)/include/tally $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/tally/*.h $(DESTDIR)$(PREFIX)/include/tally/
	install -m 644 $(BUILD)/libtally.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libtally.so $(DESTDIR)$(PREFIX)/lib/libtally.so.0
	ln -sf libtally.so.0 $(DESTDIR)$(PREFIX)/lib/libtally.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' tally.pc.in \
		> $(DESTDIR)$(PREFIX)/lib/pkgconfig/tally.pc

clean:
	rm -rf build
