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
STAMP_SYS := $(BUILD)/.system-ok
ISOBENCH := $(VENV)/bin/isobench

.PHONY: all run test build setup clean test-c test-python test-san test-arm64

all: build

setup: $(STAMP_SYS) $(VENV)/.ok $(BUILD)/build.ninja

$(STAMP_SYS): scripts/setup-system.sh
	@mkdir -p $(BUILD)
	bash scripts/setup-system.sh
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
run: build
	$(ISOBENCH) run --quick
	$(ISOBENCH) report latest -o results/report --force

# Every stage runs whatever the one before gave, then one summary says
# which were ok, which failed and which were skipped, with the reasons
# (scripts/test-stages.py); the exit status is 1 when any stage failed.
TEST_STAGES := test-c test-san test-arm64 test-python
# Narrower runs: MESON_TESTS names meson tests, PYTEST_ARGS what pytest runs.
MESON_TESTS ?=
PYTEST_ARGS ?= tests/python

test: build $(VENV)/.dev-ok
	@MAKE="$(MAKE)" $(PYTHON) scripts/test-stages.py $(TEST_STAGES) \
		MESON_TESTS="$(MESON_TESTS)" PYTEST_ARGS="$(PYTEST_ARGS)"

test-c: build
	meson test -C $(BUILD) --print-errorlogs $(MESON_TESTS)

test-python: build $(VENV)/.dev-ok
	$(VENV)/bin/pytest -q -rs $(PYTEST_ARGS)

$(BUILD_SAN)/build.ninja: meson.build $(STAMP_SYS)
	@$(call MESON_SETUP,$(BUILD_SAN),$(SAN_SETUP))

test-san: $(BUILD_SAN)/build.ninja
	ninja -C $(BUILD_SAN)
	$(SAN_ENV) meson test -C $(BUILD_SAN) --print-errorlogs $(MESON_TESTS)

# The native core cross-built for arm64, its C tests under qemu-user; SKIP
# with the reason where the cross compiler or qemu-user is missing.
test-arm64: $(STAMP_SYS)
	bash scripts/test-arm64.sh $(BUILD_ARM64)

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_ARM64) $(VENV)
