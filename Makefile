# Two entry points for a fresh clone: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Optional extras on top of test,llm,docs, e.g. `make run EXTRAS=cuda12` (NVIDIA GPU) or
# `make test EXTRAS=tpu`; each set of extras gets its own install stamp.
EXTRAS ?=
comma := ,
ALL_EXTRAS := test,llm,docs$(if $(EXTRAS),$(comma)$(EXTRAS))
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(ALL_EXTRAS))

.PHONY: run test test-all install bench docs lint clean gpu-check tpu-check gpu-bench gpu-profile

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[$(ALL_EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

# The main job on its embedded defaults: the paper's table (every layer, 54 games per row,
# the L4 rows with the embedded local model) and its figures, in results/make-run.
run: $(STAMP)
	$(BIN)/bsjax paper --out results/make-run --resume

# Three workers on two cores: a worker waiting for a subprocess or the embedded model leaves a
# core to the others (cold suite on 2 cores, same tree: 631 s, against 711 s with two workers).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder

# Everything, the slow tier too: whole-row replays of every committed result, full-size game
# identity (the MH kernels, every agent's conformance, multi-process runs), the GILP pipelines.
# Run it before committing a change that can move games or touches a kernel.
test-all: $(STAMP)
	$(BIN)/python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder -m 'slow or not slow'

# The documentation site, built offline into site/ (--strict: a broken link or reference fails).
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(BIN)/pip install --quiet ruff
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/bsjax bench --agent greedy --sampler particles --games 54

# Every agent × sampler's turn loop compiled for an H100 on this machine (no GPU): compile s,
# kernel launches per game-turn, memory per game -> benchmarks/results/h100-aot.jsonl. The CUDA
# compiler plugin lives in its own venv, so the main one never looks for a GPU.
AOT_VENV := .venv-aot
AOT_STAMP := $(AOT_VENV)/.installed
# The same for a TPU v5e 2x2 (four chips, games sharded over them): libtpu in its own venv.
TPU_VENV := .venv-tpu
TPU_STAMP := $(TPU_VENV)/.installed

# Games/s of every agent x sampler on this machine's GPU (CUDA JAX in its own venv), inside an
# 8-minute budget -> benchmarks/results/gpu-<device>.jsonl and .png.
GPU_VENV := .venv-gpu
GPU_STAMP := $(GPU_VENV)/.installed

# A venv of its own holding bsjax with the test extra and one more: $(call extra_venv,DIR,EXTRA)
define extra_venv
$(1)/.installed: pyproject.toml
	$(PYTHON) -m venv $(1)
	$(1)/bin/pip install --quiet --upgrade pip
	$(1)/bin/pip install --quiet -e '.[test,$(2)]'
	touch $(1)/.installed
endef
$(eval $(call extra_venv,$(AOT_VENV),gpu-aot))
$(eval $(call extra_venv,$(TPU_VENV),tpu))
$(eval $(call extra_venv,$(GPU_VENV),cuda12))

gpu-check: $(AOT_STAMP)
	JAX_PLATFORMS=cpu $(AOT_VENV)/bin/python benchmarks/gpu_check.py

tpu-check: $(TPU_STAMP)
	JAX_PLATFORMS=cpu $(TPU_VENV)/bin/python benchmarks/gpu_check.py --target tpu-v5e-2x2 \
		--samplers particles --games 4096,16384,65536 --out benchmarks/results/tpu-v5e-aot.jsonl

gpu-bench: $(GPU_STAMP)
	$(GPU_VENV)/bin/python benchmarks/gpu_bench.py --budget-s 420

# Where greedy's device time goes on this GPU, small and large batches, traces kept (~4 min).
gpu-profile: $(GPU_STAMP)
	$(GPU_VENV)/bin/python benchmarks/gpu_profile.py --agent greedy --games 1,54 --keep-trace
	$(GPU_VENV)/bin/python benchmarks/gpu_profile.py --agent greedy --games 65536 \
		--no-python-trace --keep-trace

clean:
	rm -rf $(VENV) $(AOT_VENV) $(TPU_VENV) $(GPU_VENV) results site
