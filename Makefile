# isobench: the two commands a newcomer needs are `make run` and `make test`.
# Each sets up whatever is missing (system packages, .venv, native build).

PYTHON ?= python3
VENV := .venv
BUILD := build
# The native code once more, with AddressSanitizer and UBSan and every
# finding fatal: test-san runs the C tests, the conformance suite and the
# fuzz corpus under them.  Static test helpers (the MPK VM's /init) are
# left out there: the sanitizers have no static runtime.
BUILD_SAN := build-san
SAN_SETUP := -Db_sanitize=address,undefined -Dbuildtype=debugoptimized \
	-Dc_args=-fno-sanitize-recover=all
# handle_segv=0: a process a test crashes on purpose (a context that
# touches an unmapped page) must die of SIGSEGV, as it would unsanitized;
# ASan's own checks do not rest on that handler.
SAN_ENV := ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:handle_segv=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
BUILD_ARM64 := build-arm64
# System packages in two sets (scripts/setup-system.sh): what `make run`
# needs, and what the tests need besides.
STAMP_SYS := $(BUILD)/.system-ok
STAMP_SYS_TEST := $(BUILD)/.system-test-ok
ISOBENCH := $(VENV)/bin/isobench
# What `make run` builds: the driver and the tiny static binary oslat
# executes; not the test programs.
RUN_TARGETS := isob isob-oslat-tiny

# Test time-outs only turn a hang into a failure; they are set far above
# what a busy machine needs.  ISOB_TIME_SCALE (a number >= 1) multiplies
# them all, for a machine slower still: meson's (--timeout-multiplier), the
# per-case alarms of the C tests (tests/c/tap.h) and the Python tests'
# (tests/python/conftest.py).  The sanitizer build multiplies meson's by
# SAN_TIME_SCALE more, as tap.h does its alarms there, and the arm64 build
# under qemu-user by ARM64_TIME_SCALE (scripts/test-arm64.sh).
ISOB_TIME_SCALE ?= 1
SAN_TIME_SCALE := 4
ARM64_TIME_SCALE := 4
TIME_MULT = $(shell awk 'BEGIN { print $(1) * $(ISOB_TIME_SCALE) }')
# Where the Python stage leaves each test's time and limits, for the time
# report at the end of make test (scripts/test-stages.py).
ISOB_TEST_TIMES := $(CURDIR)/$(BUILD)/pytest-times.json
export ISOB_TIME_SCALE SAN_TIME_SCALE ARM64_TIME_SCALE ISOB_TEST_TIMES

.PHONY: all run test build setup clean test-c test-python test-san test-arm64 test-stress

all: build

setup: $(STAMP_SYS) $(VENV)/.ok $(BUILD)/build.ninja

$(STAMP_SYS): scripts/setup-system.sh
	@mkdir -p $(BUILD)
	bash scripts/setup-system.sh --runtime
	@touch $@

$(STAMP_SYS_TEST): scripts/setup-system.sh $(STAMP_SYS)
	bash scripts/setup-system.sh --test
	@touch $@

# `make run` needs the runtime dependencies only; the tests' extras (scipy,
# pymemcache, ansible-core, pytest) come with the test targets.
$(VENV)/.ok: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check -e .
	@touch $@

$(VENV)/.dev-ok: $(VENV)/.ok
	$(VENV)/bin/pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $@

# A build folder meson has set up is reconfigured, any other is set up: a
# fresh clone sees no complaint about a build tree that is not there yet.
MESON_SETUP = if [ -f $(1)/meson-private/coredata.dat ]; then \
		meson setup --reconfigure $(1) $(2) >/dev/null; else meson setup $(1) $(2); fi

$(BUILD)/build.ninja: meson.build $(STAMP_SYS)
	@$(call MESON_SETUP,$(BUILD))

build: setup
	ninja -C $(BUILD)

# The main job: the quick default suite on every mechanism available here,
# a summary table, results in the SQLite store, then a report of that run
# (HTML, Markdown, LaTeX, CSV, plots as PNG, SVG and PDF) with its soundness findings.
# results/report is make's own folder: --force lets the report replace files
# that a report of an older isobench left there without a manifest.
run: setup
	ninja -C $(BUILD) $(RUN_TARGETS)
	$(ISOBENCH) run --quick
	$(ISOBENCH) report latest -o results/report --force

# Every stage runs whatever the one before gave, then one summary says
# which were ok, which failed and which were skipped, with the reasons
# (scripts/test-stages.py); the exit status is 1 when any stage failed.
TEST_STAGES := test-c test-san test-arm64 test-python
# Narrower runs: MESON_TESTS names meson tests, PYTEST_ARGS what pytest runs.
MESON_TESTS ?=
PYTEST_ARGS ?= tests/python

test: $(STAMP_SYS_TEST) build $(VENV)/.dev-ok
	@MAKE="$(MAKE)" $(PYTHON) scripts/test-stages.py $(TEST_STAGES) \
		MESON_TESTS="$(MESON_TESTS)" PYTEST_ARGS="$(PYTEST_ARGS)"

# make test with every CPU busy: STRESS_PER_CPU CPU hogs per CPU at nice
# STRESS_NICE (scripts/cpu-hogs.py; they die with it), to show that no
# time-out is within reach of a loaded machine.  A load like a shared
# machine's: make test-stress STRESS_PER_CPU=4 STRESS_NICE=0
STRESS_PER_CPU ?= 1
STRESS_NICE ?= 19
test-stress: $(STAMP_SYS_TEST) build $(VENV)/.dev-ok
	@$(PYTHON) scripts/cpu-hogs.py --per-cpu $(STRESS_PER_CPU) --nice $(STRESS_NICE) -- \
		$(MAKE) --no-print-directory test

test-c: $(STAMP_SYS_TEST) build
	meson test -C $(BUILD) --print-errorlogs -t $(call TIME_MULT,1) $(MESON_TESTS)

test-python: $(STAMP_SYS_TEST) build $(VENV)/.dev-ok
	$(VENV)/bin/pytest -q -rs $(PYTEST_ARGS)

$(BUILD_SAN)/build.ninja: meson.build $(STAMP_SYS)
	@$(call MESON_SETUP,$(BUILD_SAN),$(SAN_SETUP))

test-san: $(STAMP_SYS_TEST) $(BUILD_SAN)/build.ninja
	ninja -C $(BUILD_SAN)
	$(SAN_ENV) meson test -C $(BUILD_SAN) --print-errorlogs \
		-t $(call TIME_MULT,$(SAN_TIME_SCALE)) $(MESON_TESTS)

# The native core cross-built for arm64, its C tests under qemu-user; SKIP
# with the reason where the cross compiler or qemu-user is missing.
test-arm64: $(STAMP_SYS_TEST)
	bash scripts/test-arm64.sh $(BUILD_ARM64)

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_ARM64) $(VENV)
