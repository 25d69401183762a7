# The only commands the README and .ci/run use. `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
JAVA17 := $(firstword $(wildcard /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/java-1.17.0-openjdk-amd64 /usr/lib/jvm/*17*))
export JAVA_HOME ?= $(JAVA17)
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: help setup develop test test-rust test-python test-wheel lint fmt bench bench-spark demo wheel clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

$(VENV)/.installed: pyproject.toml Cargo.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev,spark,report,kafka]"
	touch $@

setup: $(VENV)/.installed  ## create .venv and install floodmark (built from source) with all extras

develop: setup  ## rebuild the native module into .venv after a Rust change
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .

test: develop test-rust test-python test-wheel  ## set up, then run every test (Rust, Python, wheel)

# The property tests (proptest, Hypothesis) draw the same cases on every run, so that a CI
# failure is reproducible; PROPTEST_RNG_SEED=<n> or HYPOTHESIS_PROFILE=explore searches
# further.
PROPTEST_RNG_SEED ?= 20261123
export PROPTEST_RNG_SEED

test-rust:  ## Rust unit, integration and doc tests (no Python needed)
	cargo test --quiet

# Two pytest processes side by side: the cluster's tests and the crash tests (much of
# their time is JVMs starting and waiting in subprocesses) next to all the others
# (marker `side`, tests/python/spark/conftest.py). Each prints its report when it ends;
# the target fails if either fails.
test-python: develop  ## pytest: conformance vectors, property tests, Spark pipeline
	$(MAKE) --no-print-directory -j2 --output-sync=target pytest-main pytest-side

.PHONY: pytest-main pytest-side
pytest-main:
	mkdir -p build
	$(PY) -m pytest -q -m "not side" --basetemp=build/pytest-main

pytest-side:
	mkdir -p build
	FLOODMARK_TEST_SHARD=side $(PY) -m pytest -q -m side --basetemp=build/pytest-side

test-wheel:  ## build the release abi3 wheel, install it into a fresh venv, import and run it
	rm -rf dist build/wheel-venv
	$(PY) -m maturin build --release --quiet --out dist
	$(PYTHON) -m venv build/wheel-venv
	build/wheel-venv/bin/pip install --quiet dist/*.whl
	cd build && wheel-venv/bin/python -c "import floodmark; from floodmark import WatermarkStrategy, drive; \
	  r = drive(WatermarkStrategy.for_monotonous_timestamps(), [1, 2, 3], [0, 100, 300]); \
	  assert r.record_watermark.to_pylist() == [-2**63, 0, 1], r; print('wheel ok', floodmark.__version__)"
	build/wheel-venv/bin/floodmark --help > /dev/null

lint: develop  ## cargo fmt --check, clippy -D warnings, ruff, mypy, stubtest
	cargo fmt --check
	cargo clippy --all-targets --all-features --quiet -- -D warnings
	$(VENV)/bin/ruff check python tests benches
	$(VENV)/bin/ruff format --check python tests benches
	$(VENV)/bin/mypy
	$(PY) -m mypy.stubtest floodmark._core --allowlist stubtest-allowlist.txt

fmt:  ## format Rust and Python
	cargo fmt
	$(VENV)/bin/ruff format python tests benches
	$(VENV)/bin/ruff check --fix python tests benches

bench:  ## criterion benches of the Rust hot paths
	cargo bench

bench-spark: develop  ## Spark pipeline vs identity mapInArrow, native window count and native floor (10M rows)
	$(PY) benches/spark_pipeline.py

demo: develop  ## the main job: `floodmark demo` on local Spark, writes a report folder
	$(VENV)/bin/floodmark demo

wheel:  ## build a release abi3 wheel into dist/
	$(PY) -m maturin build --release --out dist

clean:  ## remove build outputs and the venv
	cargo clean
	rm -rf $(VENV) dist build/wheel-venv
