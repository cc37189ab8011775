# The two commands a newcomer needs: `make demo` and `make test`. Both install into .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck imports unit chaos bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/toposched demo

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy daemon events state placement preemption devcluster manifests bench tests

imports: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck imports unit

# The chaos suite at full length (`make test` runs it once per case): tests/chaos/, marker `chaos`.
CHAOS_ITERATIONS ?= 20
CHAOS_DIR ?= /tmp/toposched-chaos

chaos: $(STAMP)
	$(BIN)/pytest -q -m chaos --chaos-iterations=$(CHAOS_ITERATIONS) --basetemp=$(CHAOS_DIR)

BENCHES := eventlog topology placement preemption quota simulate devcluster daemon

BENCH_TARGETS := $(VENV)/bench-targets.txt

# Every benchmark, then each figure against its target in one table (bench/targets.py). BEFORE=DIR:
# a checkout of the code before (1ccf0dd), run alternately with the large simulate trace.
# RESTART_BEFORE=DIR: a checkout of c06b3d1, whose restart runs alternately with this code's.
bench: $(STAMP)
	rm -f $(BENCH_TARGETS)
	for b in $(BENCHES); do echo "== python -m bench.$$b"; \
		TOPOSCHED_BENCH_TARGETS=$(BENCH_TARGETS) $(BIN)/python -m bench.$$b \
			$$(if [ "$$b" = simulate ] && [ -n "$(BEFORE)" ]; then echo --before "$(BEFORE)"; fi) \
			$$(if [ "$$b" = eventlog ] && [ -n "$(RESTART_BEFORE)" ]; then echo --before "$(RESTART_BEFORE)"; fi) \
			|| exit 1; done
	@echo "== every figure against its target (python -m bench.targets)"
	$(BIN)/python -m bench.targets $(BENCH_TARGETS)

clean:
	rm -rf $(VENV) build *.egg-info
