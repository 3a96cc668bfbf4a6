# Two entry points for a fresh clone: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

# The main job on its embedded defaults.
run: $(STAMP)
	$(BIN)/bsjax play --agent greedy --sampler chain --rng reference --seeds 3 --out results/make-run --resume

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

bench: $(STAMP)
	$(BIN)/bsjax bench --agent greedy --sampler particles --games 54

clean:
	rm -rf $(VENV) results
