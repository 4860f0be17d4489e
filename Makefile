# mlbridge: the two commands a newcomer needs are `make demo` and `make test`.
# Both set everything up first (scripts/setup.sh) and are fast when nothing
# changed. See README.md.

ROOT        := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
VENV        := $(ROOT)/.venv
PY          := $(VENV)/bin/python
BUILD       := $(ROOT)/build
BUILD_ASAN  := $(ROOT)/build-asan
JOBS        ?= $(shell nproc)

.PHONY: all setup build build-asan test demo lint format clean help bench-roundtrip bench-inprocess bench mutation

all: build

help:
	@echo "make demo   set up, build, and run the main job (see README)"
	@echo "make test   set up, build, and run every test suite"
	@echo "make setup  install what is missing (Debian packages, ONNX Runtime, .venv)"
	@echo "make build  build the C++ runtime and plugins into build/"
	@echo "make lint   ruff over the Python code"
	@echo "make bench-roundtrip  the round-trip benchmark (bench/, results in bench/results/)"
	@echo "make bench-inprocess  the same through the ONNX Runtime and TF AOT runners"
	@echo "make bench  every benchmark, one report (JSON, Markdown, plots; README table)"
	@echo "make mutation  mutation testing of the wire-format core (hours; MUTATION_ARGS=--sample 0.2 for an estimate; docs/testing.md)"
	@echo "make clean  remove build folders (keeps .venv and .deps)"

setup:
	@$(ROOT)/scripts/setup.sh

build: setup
	@$(VENV)/bin/mlbridge build --build-dir $(BUILD) -j $(JOBS)

# C++ unit tests and fuzzers under AddressSanitizer + UndefinedBehaviorSanitizer,
# built with clang-22 in a separate folder.
build-asan: setup
	@$(VENV)/bin/mlbridge build --build-dir $(BUILD_ASAN) -j $(JOBS) \
	  --cmake-arg=-DCMAKE_C_COMPILER=clang-22 --cmake-arg=-DCMAKE_CXX_COMPILER=clang++-22 \
	  --cmake-arg=-DMLBRIDGE_BUILD_PLUGINS=OFF --cmake-arg=-DMLBRIDGE_BUILD_FUZZERS=ON \
	  --cmake-arg=-DMLBRIDGE_SANITIZERS=address\;undefined

test: build build-asan
	@$(PY) $(ROOT)/scripts/run_tests.py --build-dir $(BUILD) --asan-build-dir $(BUILD_ASAN)

# The ML inline advisor on the built-in default model against stock -Oz, over
# the corpus's held-out projects (mlbridge/demo.py).
demo: build
	@$(PY) -m mlbridge.demo --build-dir $(BUILD)

# A measurement, not a test (bench/roundtrip.py --help; BENCH_ARGS=--quick for a short run).
bench-roundtrip: build
	@$(PY) $(ROOT)/bench/roundtrip.py --build-dir $(BUILD) $(BENCH_ARGS)

# The in-process runners against direct calls of the same models, 1 and 2
# threads (bench/inprocess_roundtrip.py --help).
bench-inprocess: build
	@$(PY) $(ROOT)/bench/inprocess_roundtrip.py --build-dir $(BUILD) $(BENCH_ARGS)

# Every benchmark in one run (mlbridge bench, docs/bench.md): the report goes to
# bench/results/report-<time>.*, the table and plots into README.md.
# BENCH_ARGS=--quick for a run of under 2 minutes.
bench: build
	@$(VENV)/bin/mlbridge bench --build-dir $(BUILD) --out $(ROOT)/bench/results --update-readme $(BENCH_ARGS)

# Mutation testing with mutmut (scripts/mutation.py, docs/testing.md): not part of
# `make test`; a full run takes about three hours on two cores (MUTATION_ARGS="--sample 0.2"
# tests a fifth of the mutants for an estimate).
mutation: build
	@$(PY) $(ROOT)/scripts/mutation.py --build-dir $(BUILD) $(MUTATION_ARGS)

lint: setup
	@$(VENV)/bin/ruff check $(ROOT)
	@$(VENV)/bin/ruff format --check $(ROOT)/mlbridge $(ROOT)/test/python $(ROOT)/scripts

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
