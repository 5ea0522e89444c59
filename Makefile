# SPDX-License-Identifier: MIT
# A thin wrapper around CMake (the real build). The README's two commands,
# each of which installs the Debian packages it needs (tools/deps.sh):
#   make demo   build tw-trace and the purgatory example, show seed 001 in
#               kafka and exact mode side by side, run the acks=all
#               purgatory example
#   make test   build everything, then run every test through ctest
# Also: make sanitize (ASan+UBSan test run), make clang (clang -Werror build
# and tests), make valgrind, make install PREFIX=... (builds only what it
# installs), make deps.

BUILD    ?= build
PREFIX   ?= /usr/local
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
# Warnings are errors in this project's own builds: every cmake below
# passes it (CMakeLists.txt leaves it off for a user's plain cmake, so a
# newer compiler's new warning cannot stop an install of a release or the
# .deb). `make install TW_WERROR=OFF` where such a warning stops it.
TW_WERROR ?= ON
WERROR = -DTW_WERROR=$(TW_WERROR)
# No "Entering directory" lines from the makes that cmake --build runs
# (MAKEFLAGS reaches them through the environment).
MAKEFLAGS += --no-print-directory

.PHONY: coverage fuzz docs all build demo test sanitize tsan tsan-build flaky soak model clang valgrind install deps deps-all clean abi-baseline deb install-tsan install-asan \
	bench-service bench-purgatory bench bench-quick bench-big bench-deps bench-instr bench-instr-purgatory bench-instr-service bench-locked bench-geometry \
	install-debug configs configs-all m32

all: build

# Each target installs what it needs, and only that (tools/deps.sh: apt-get
# --no-install-recommends as root or with password-less sudo; otherwise it
# names the packages):
#   make deps       the build: cmake, gcc, libc6-dev, pkg-config
#   make test       also, if it can: g++, libuv1-dev, libevent-dev,
#                   liburing-dev (the header test, the event-loop examples)
#   make deps-all   everything any target uses (CI): also Chromium and
#                   abigail-tools (the browser and ABI tests, skipped
#                   without them), clang, valgrind, spin, lcov, doxygen,
#                   the Debian packaging tools and gcc-multilib
DEPS_ALL = build test test-extra clang valgrind model coverage docs deb m32
deps:
	@bash tools/deps.sh build

deps-all:
	@bash tools/deps.sh $(DEPS_ALL)

$(BUILD)/Makefile:
	@$(MAKE) -s deps
	cmake -S . -B $(BUILD) $(WERROR) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

build: $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS)

# Seed 001 in kafka mode and in exact mode side by side, one picture of
# the wheel, then the purgatory example (tools/demo.sh): it builds the two
# programs it runs, nothing else.
demo: $(BUILD)/Makefile
	@echo "demo: building tw-trace and examples/produce_acks.c in $(BUILD)/"
	@cmake --build $(BUILD) -j $(JOBS) --target tw-trace produce_acks >/dev/null
	@bash tools/demo.sh $(BUILD)

# A test whose optional tool or library is missing is skipped, and says
# why on a "skipped:" line, listed after ctest's summary.
test:
	@bash tools/deps.sh --optional test
	@$(MAKE) -s $(BUILD)/Makefile
	@cmake $(BUILD) >/dev/null # find what deps.sh may just have installed
	cmake --build $(BUILD) -j $(JOBS)
	@cd $(BUILD) && { ctest --output-on-failure -j $(JOBS); rc=$$?; \
	  grep -h '^skipped: ' Testing/Temporary/LastTest.log 2>/dev/null | sort -u; exit $$rc; }

sanitize:
	@$(MAKE) -s deps
	cmake -S . -B $(BUILD)-asan $(WERROR) -DTW_SANITIZE=ON -DTW_DEBUG=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && ctest --output-on-failure -j $(JOBS)
	# Optimised, as make install-asan builds it: the compiler's code and
	# the linker's rewrites of it differ from the debug build's (a UBSan
	# check that read stale flags failed every cancel_sync here only).
	cmake -S . -B $(BUILD)-asan-opt $(WERROR) -DTW_SANITIZE=ON -DTW_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD)-asan-opt -j $(JOBS)
	cd $(BUILD)-asan-opt && ctest --output-on-failure -j $(JOBS)

# The threaded tests under ThreadSanitizer (about a minute).
tsan: tsan-build
	cd $(BUILD)-tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -L threaded

# The ThreadSanitizer build alone: flaky and soak run its tests their own
# way, so they need it built, not make tsan's run of them first.
tsan-build:
	@$(MAKE) -s deps
	cmake -S . -B $(BUILD)-tsan $(WERROR) -DTW_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD)-tsan -j $(JOBS)

# The threaded suite FLAKY_RUNS times under ThreadSanitizer with every core
# kept busy by a second job: every test that failed even once, and how
# often (tests/support/flaky.sh). A test that leans on the scheduler shows here.
FLAKY_RUNS ?= 30
flaky: tsan-build
	bash tests/support/flaky.sh $(BUILD)-tsan $(FLAKY_RUNS)

# The stress tests for SOAK_MINUTES with the schedule shaken at the
# protocol's test points, under ThreadSanitizer (tests/support/soak.sh).
SOAK_MINUTES ?= 30
soak: tsan-build
	bash tests/support/soak.sh $(BUILD)-tsan $(SOAK_MINUTES)

# The SPIN models of the service's and the purgatory's protocols: every
# scenario exhaustively, then every protocol bug found in the code put back into
# the model must be found (model/check.sh, docs/model.md); the tables of
# the service model's state-word transitions and of the purgatory model's
# op-state transitions must be the ones committed; and the check of the C
# code's transitions against them must find each transition mutant
# (tests/transitions/mutants/*.patch, each applied to a scratch copy of the tree by
# tests/transitions/mutants_are_caught.sh: one build, rebuilt per mutant).
model:
	@bash tools/deps.sh build model
	bash model/check.sh
	JOBS=$(JOBS) bash tests/transitions/mutants_are_caught.sh . $(BUILD)-mutants

# CLANG_CTEST_EXCLUDE: a ctest -E pattern of tests not to run again (CI:
# the ones whose result does not depend on the build's compiler, which
# make test has run).
clang:
	@bash tools/deps.sh build clang
	CC=clang cmake -S . -B $(BUILD)-clang $(WERROR)
	cmake --build $(BUILD)-clang -j $(JOBS)
	cd $(BUILD)-clang && ctest --output-on-failure -j $(JOBS) \
	  $(if $(CLANG_CTEST_EXCLUDE),-E '$(CLANG_CTEST_EXCLUDE)')

# The test programs (build/tests/FOLDER_FILE, from tests/FOLDER/FILE.c)
# that run under memcheck as they are; the stress and differential tests
# run below with fewer operations.
VALGRIND_TESTS = \
	wheel_add_cancel_reschedule wheel_callbacks_and_order wheel_windows \
	wheel_ends_of_time wheel_bad_input wheel_kafka_timer_tests \
	wheel_seed_examples wheel_invariant_checker \
	service_add_cancel_reschedule service_windows service_window_end \
	service_manual_loop service_bad_input service_executors_and_back_pressure \
	service_cancel_sync_and_teardown service_claims service_one_run_at_a_time \
	service_cancels_across_services service_runs_and_reinits \
	service_edeadlk_only_for_a_cycle \
	purgatory_complete_expire_purge purgatory_timeouts_and_tolerance \
	purgatory_many_threads purgatory_bad_input \
	purgatory_watch_check_and_shutdown purgatory_completion_and_release \
	purgatory_completion_during_a_watch purgatory_release_outside_locks \
	library_error_texts library_durations_and_version library_overload \
	library_lock purgatory_check_keys purgatory_keys purgatory_pinned_lists \
	service_bells service_due_runs service_expiry_scale \
	service_loop_wakes_and_cancel_reports service_reaper_sleep \
	service_window_promises service_window_promises_threaded wheel_big_buckets \
	transitions_purgatory_checker transitions_service_checker
VALGRIND = valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=all

# memcheck over every test binary and the trace tool (the differential test
# with fewer operations: valgrind is ~30x slower).
valgrind: build
	@bash tools/deps.sh valgrind
	@set -e; for t in $(VALGRIND_TESTS); do \
	  echo "valgrind $$t"; $(VALGRIND) $(BUILD)/tests/$$t >/dev/null; done
	@echo "valgrind wheel_differential 100000"
	@$(VALGRIND) $(BUILD)/tests/wheel_differential 100000 >/dev/null
	@echo "valgrind service_stress 100000"
	@$(VALGRIND) $(BUILD)/tests/service_stress 100000 >/dev/null
	@echo "valgrind purgatory_stress 2000"
	@$(VALGRIND) $(BUILD)/tests/purgatory_stress 2000 >/dev/null
	@echo "valgrind tw-trace"
	@$(VALGRIND) $(BUILD)/tw-trace --text examples/seed001.tw >/dev/null
	@$(VALGRIND) $(BUILD)/tw-trace --events tests/trace/scenarios/cancel.tw >/dev/null
	@$(VALGRIND) $(BUILD)/tw-trace --html $(BUILD)/valgrind-seed004.html examples/seed004.tw
	@echo "valgrind examples"
	@$(VALGRIND) $(BUILD)/epoll_idle 50 >/dev/null
	@$(VALGRIND) $(BUILD)/service_pool 20 >/dev/null
	@$(VALGRIND) $(BUILD)/produce_acks 5000 3 30 >/dev/null
	@if [ -x $(BUILD)/libuv_idle ]; then $(VALGRIND) $(BUILD)/libuv_idle 50 >/dev/null; fi
	@if [ -x $(BUILD)/libevent_idle ]; then $(VALGRIND) $(BUILD)/libevent_idle 50 >/dev/null; fi
	@if [ -x $(BUILD)/io_uring_idle ]; then $(VALGRIND) $(BUILD)/io_uring_idle 30 >/dev/null; fi
	@echo "valgrind: clean"

# The wheel against libuv, libev, libevent (the distribution's packages)
# and a binary heap, in seven cells and the wheel's unordered jump (the
# method: bench/wheel_bench.c); nothing fetched from elsewhere is built: a
# table on stdout, build/bench/results.csv and build/bench/results.png
# (gnuplot). bench: N = 1e3 .. 1e7; bench-quick: N = 1e3, 1e6; bench-big:
# the wheel alone with 1e8 pending timers;
# bench-instr: instructions per operation of each library in each cell
# under valgrind's callgrind at N = BENCH_INSTR_N (bench/instr.sh), a
# table and build/bench/instr.csv; its last column, timingwheel-inline,
# is the wheel compiled into the driver's file (the amalgamation).
bench-deps:
	@bash tools/deps.sh build bench

WHEEL_BENCH = cmake -S . -B $(BUILD) $(WERROR) >/dev/null && \
	cmake --build $(BUILD) -j $(JOBS) --target wheel_bench && mkdir -p $(BUILD)/bench

bench: bench-deps
	$(WHEEL_BENCH)
	$(BUILD)/bench/wheel_bench $(BUILD)/bench/results.csv
	bench/plot.sh $(BUILD)/bench/results.csv $(BUILD)/bench/results.png

bench-quick: bench-deps
	$(WHEEL_BENCH)
	$(BUILD)/bench/wheel_bench --quick $(BUILD)/bench/results.csv
	bench/plot.sh $(BUILD)/bench/results.csv $(BUILD)/bench/results.png

bench-big: bench-deps
	$(WHEEL_BENCH)
	$(BUILD)/bench/wheel_bench --big $(BUILD)/bench/big.csv

BENCH_INSTR_N ?= 100000
bench-instr: bench-deps
	@bash tools/deps.sh valgrind
	$(WHEEL_BENCH)
	cmake --build $(BUILD) -j $(JOBS) --target wheel_bench_inline
	bash bench/instr.sh $(BUILD)/bench/wheel_bench $(BENCH_INSTR_N) $(BUILD)/bench/instr.csv \
	  $(BUILD)/bench/wheel_bench_inline

# bench-geometry: the wheel alone at each of GEOMETRY_SIZES buckets a level
# (wheel_bench --wheel-size), every cell's instructions per operation side
# by side (bench/instr.sh), then each geometry's fixed memory and how idle
# timeouts coalesce; table and build/bench/geometry.csv.
GEOMETRY_SIZES ?= 64 256
bench-geometry: bench-deps
	@bash tools/deps.sh valgrind
	$(WHEEL_BENCH)
	bash bench/instr.sh "$(BUILD)/bench/wheel_bench --wheel-only --wheel-size $(firstword $(GEOMETRY_SIZES))" \
	  $(BENCH_INSTR_N) $(BUILD)/bench/geometry.csv \
	  $(foreach s,$(wordlist 2,99,$(GEOMETRY_SIZES)),"$(BUILD)/bench/wheel_bench --wheel-only --wheel-size $(s)")

# The timer service against a binary heap under one mutex: a
# table on stdout and build/bench/service.csv.
bench-service: build
	@mkdir -p $(BUILD)/bench
	$(BUILD)/bench/service_bench $${BENCH_N:-1000000} $(BUILD)/bench/service.csv
	$(BUILD)/bench/service_bench --connections $${BENCH_N:-1000000} 20 0 1 15

# bench-instr-purgatory: the purgatory's calls on one thread under
# callgrind (purgatory_bench --instr): instructions per watch, per op a
# key check tries, per check of a key with 3 ops, per completion and per
# expiry. bench-instr-service: the service's instructions per add,
# cancel, reschedule and expired timer (on the scanner and on one
# executor) beside the wheel under one mutex (bench/service_instr.c).
# Each prints a table and writes build/bench/instr-NAME.csv.
# $(call INSTR_ONE,TARGET,NAME): build TARGET, count it under callgrind.
INSTR_ONE = @bash tools/deps.sh valgrind && \
	cmake -S . -B $(BUILD) $(WERROR) >/dev/null && \
	cmake --build $(BUILD) -j $(JOBS) --target $(1) && \
	mkdir -p $(BUILD)/bench && \
	bash bench/instr.sh $(BUILD)/bench/$(1) $(BENCH_INSTR_N) \
	  $(BUILD)/bench/instr-$(2).csv

bench-instr-purgatory: bench-deps
	$(call INSTR_ONE,purgatory_bench,purgatory)

bench-instr-service: bench-deps
	$(call INSTR_ONE,service_instr,service)

# bench-locked: the locked instructions (lock prefix, xchg with memory) per
# operation of the purgatory's and the service's cells, counted under
# callgrind (bench/locked.sh), in a process that has had a second thread
# (LOCKED_MT=1: glibc takes its mutexes with no locked instruction until
# then, which no threaded server sees).
bench-locked: bench-deps
	@bash tools/deps.sh valgrind && \
	cmake -S . -B $(BUILD) $(WERROR) >/dev/null && \
	cmake --build $(BUILD) -j $(JOBS) --target purgatory_bench service_instr && \
	LOCKED_MT=1 bash bench/locked.sh $(BUILD)/bench/purgatory_bench $(BENCH_INSTR_N) \
	  $(BUILD)/bench/locked-purgatory.csv && \
	LOCKED_MT=1 bash bench/locked.sh $(BUILD)/bench/service_instr $(BENCH_INSTR_N) \
	  $(BUILD)/bench/locked-service.csv

# The purgatory at a Poisson request rate, then the highest rate
# this machine sustains.
bench-purgatory: build
	$(BUILD)/bench/purgatory_bench 200000 20000
	$(BUILD)/bench/purgatory_bench 300000 48828
	$(BUILD)/bench/purgatory_bench --find
	$(BUILD)/bench/purgatory_bench --idle 1000000
	$(BUILD)/bench/purgatory_bench --tolerance 1 200000 20000
	$(BUILD)/bench/purgatory_bench --tolerance 1 300000 48828

# Line and branch coverage of src/ by the whole test suite (gcov + lcov),
# with an HTML report; fails below COVERAGE_LINES % of lines or
# COVERAGE_BRANCHES % of branches.
COVERAGE_LINES ?= 95
COVERAGE_BRANCHES ?= 90
LCOV = lcov -q --rc lcov_branch_coverage=1
coverage:
	@bash tools/deps.sh build coverage
	cmake -S . -B $(BUILD)-cov $(WERROR) -DTW_COVERAGE=ON -DCMAKE_BUILD_TYPE=Debug -DTW_BUILD_BENCH=OFF >/dev/null
	cmake --build $(BUILD)-cov -j $(JOBS)
	$(LCOV) --zerocounters --directory $(BUILD)-cov
	cd $(BUILD)-cov && ctest -j $(JOBS) >/dev/null || (ctest --rerun-failed --output-on-failure; exit 1)
	$(LCOV) --capture --directory $(BUILD)-cov --output-file $(BUILD)-cov/all.info 2>/dev/null
	$(LCOV) --extract $(BUILD)-cov/all.info '$(CURDIR)/src/*' --output-file $(BUILD)-cov/src.info
	@lcov --rc lcov_branch_coverage=1 --list $(BUILD)-cov/src.info 2>/dev/null | tail -n +3
	@genhtml -q --branch-coverage -o $(BUILD)-cov/html $(BUILD)-cov/src.info 2>/dev/null
	@lcov --rc lcov_branch_coverage=1 --summary $(BUILD)-cov/src.info 2>&1 | awk \
	  -v L=$(COVERAGE_LINES) -v B=$(COVERAGE_BRANCHES) \
	  '/lines\.*:/ { l = $$2 + 0 } /branches\.*:/ { b = $$2 + 0 } \
	   END { printf "coverage of src/: %.1f%% of lines (need %d), %.1f%% of branches (need %d); report: $(BUILD)-cov/html/index.html\n", l, L, b, B; \
	         exit (l < L || b < B) }'

# libFuzzer (clang): each target runs FUZZ_SECONDS from the seed corpus in
# fuzz/corpus/NAME (new inputs go to build-fuzz/corpus/NAME, not the repo).
# A crash leaves its input in build-fuzz/ and fails the target.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = scenario wheel purgatory
fuzz:
	@bash tools/deps.sh build clang
	CC=clang cmake -S . -B $(BUILD)-fuzz $(WERROR) -DTW_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD)-fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
	@set -e; for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(BUILD)-fuzz/corpus/$$t; \
	  echo "fuzz_$$t: $(FUZZ_SECONDS) s (the targets side by side)"; \
	  ( cd $(BUILD)-fuzz && if ./fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
	      -print_final_stats=1 corpus/$$t $(CURDIR)/fuzz/corpus/$$t 2>fuzz_$$t.log; \
	    then echo 0; else echo 1; fi >fuzz_$$t.rc ) & \
	done; wait; \
	for t in $(FUZZ_TARGETS); do \
	  [ "$$(cat $(BUILD)-fuzz/fuzz_$$t.rc)" = 0 ] || \
	    { tail -40 $(BUILD)-fuzz/fuzz_$$t.log; echo "fuzz_$$t: FOUND A CRASH"; exit 1; }; \
	  echo "fuzz_$$t:"; grep -E '^stat::number_of_executed_units|^Done' $(BUILD)-fuzz/fuzz_$$t.log; \
	done; echo "fuzz: no finding"

# The API reference from the public headers: doxygen with warnings as
# errors (every declaration and parameter documented), then a check that
# every function states its result and its thread safety, and that no
# relative link in the pages is broken.
docs:
	@bash tools/deps.sh docs
	@mkdir -p $(BUILD)/docs
	TW_DOCS_OUT=$(BUILD)/docs doxygen docs/Doxyfile
	bash docs/check-api-docs.sh include/timingwheel/*.h
	bash docs/check-links.sh $(BUILD)/docs/html
	@echo "docs: $(BUILD)/docs/html/index.html (make install installs it)"

# The Debian packages (libtimingwheel0.1, libtimingwheel-dev,
# timingwheel-tools) built from a scratch copy, lintian-checked, installed
# into a scratch root and used (tests/packaging/deb.sh).
deb:
	@bash tools/deps.sh build deb
	bash tests/packaging/deb.sh . $(BUILD)/deb

# The ABI baseline that tests/packaging/abi.sh compares the shared library
# with: regenerate it (and commit it) when the ABI changes on purpose.
abi-baseline: build
	abidw --headers-dir include/timingwheel --no-corpus-path \
	  --out-file abi/libtimingwheel.abi $$(ls $(BUILD)/libtimingwheel.so.*.* | head -1)

# What make install builds: what it installs, and nothing else (no test,
# bench or amalgamation): both libraries, tw-trace and the manual pages
# (one per call, the build's own, tools/man3.sh); the rest it installs
# (headers, examples' sources, pkg-config and CMake files) is not built.
# Where doxygen is, the HTML reference too (doxygen alone: make docs adds
# the checks). The prefix is given at install time too: build/ may have
# been configured (by make demo, say) before PREFIX was chosen.
INSTALL_TARGETS = timingwheel timingwheel_shared tw-trace man3
install: $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS) --target $(INSTALL_TARGETS)
	@if command -v doxygen >/dev/null 2>&1; then mkdir -p $(BUILD)/docs && \
	  TW_DOCS_OUT=$(BUILD)/docs doxygen docs/Doxyfile; else \
	  echo "install: no doxygen, so no HTML reference" \
	       "(apt-get install doxygen, then make install again)"; fi
	cmake --install $(BUILD) --prefix $(PREFIX)

# The instrumented variants, installed beside the plain library: a program
# built with -fsanitize=thread (or address) links libtimingwheel-tsan
# (-asan) through timingwheel-tsan.pc or find_package(timingwheel-tsan).
# And the checked build (TW_DEBUG): libtimingwheel-debug, timingwheel-debug.pc,
# find_package(timingwheel-debug), which names a caller's mistake at the call.
# A variant installs its libraries alone, and builds nothing else.
VARIANT_FLAG_tsan = -DTW_TSAN=ON
VARIANT_FLAG_asan = -DTW_SANITIZE=ON
VARIANT_FLAG_debug = -DTW_DEBUG=ON
install-tsan install-asan install-debug: install-%:
	@$(MAKE) -s deps
	cmake -S . -B $(BUILD)-install-$* $(WERROR) -DCMAKE_INSTALL_PREFIX=$(PREFIX) \
	  -DTW_BUILD_TESTS=OFF -DTW_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  $(VARIANT_FLAG_$*) >/dev/null
	cmake --build $(BUILD)-install-$* -j $(JOBS) --target timingwheel timingwheel_shared
	cmake --install $(BUILD)-install-$* --prefix $(PREFIX)

# The configurations users are told to use (the default, -DTW_DEBUG=ON,
# Release), with gcc and clang, warnings as errors (tools/configs.sh; CI).
# configs-all: every CMake build type with and without TW_DEBUG.
configs:
	@bash tools/deps.sh build clang
	CONFIGS_SKIP="$(CONFIGS_SKIP)" bash tools/configs.sh $(BUILD)-configs $(JOBS)

configs-all:
	@bash tools/deps.sh build clang
	bash tools/configs.sh --all $(BUILD)-configs-all $(JOBS)

# A 32-bit x86 build with a 64-bit time_t and the library's tests on it,
# under qemu-user where the kernel runs no 32-bit program (tools/m32.sh;
# CI). x86-64 hosts only.
m32:
	@bash tools/deps.sh build m32
	bash tools/m32.sh $(BUILD)-m32 $(JOBS)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-clang $(BUILD)-tsan $(BUILD)-fuzz $(BUILD)-cov \
	  $(BUILD)-install-tsan $(BUILD)-install-asan $(BUILD)-install-debug \
	  $(BUILD)-configs $(BUILD)-configs-all $(BUILD)-m32
