# The Tested Transformer: set-up, gates and book build.
# `make test` is what CI runs (.ci/run); `make book` builds the HTML book.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SANITIZE := notebooks/nbval_sanitize.cfg
# Stored outputs come from a CPU run: compare them strictly on CPU, only run the cells on CUDA.
NBVAL_MODE = $(shell $(BIN)/python -c "import torch; print('--nbval-lax' if torch.cuda.is_available() else '--nbval')")
# The browser test's Chromium: any of these on PATH, else Debian's `chromium` from apt-get.
CHROMIUM_CMDS := chromium chromium-browser google-chrome
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: setup book test test-gpu export-check executed-check pytest-lib pytest-nb pytest-nb-reader \
	gates beside-gates pytest-strict floor-setup pytest-floor node-setup demo book-build browser-setup browser-test clean

# uv installs the pinned environment (about 30 s here, pip took 2 min). It is bootstrapped with pip
# at the version requirements.txt pins, and told where pip finds local wheels (find-links), so that
# torch==2.13.0 resolves to the same CPU build as with pip.
UV_PIN     := $(shell grep -E '^uv==' requirements.txt)
FIND_LINKS := $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null)
UV_INSTALL  = $(BIN)/uv pip install -q --compile-bytecode --index-strategy unsafe-best-match \
	$(addprefix --find-links ,$(FIND_LINKS)) $(if $(PIP_EXTRA_INDEX_URL),--extra-index-url $(PIP_EXTRA_INDEX_URL))
$(STAMP): requirements.txt pyproject.toml
	@command -v dot >/dev/null || { echo "installing Debian's graphviz (dot draws the book's diagrams)"; \
		$(SUDO) apt-get update -qq; $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check "$(UV_PIN)"
	$(UV_INSTALL) --python $(BIN)/python -r requirements.txt
	$(UV_INSTALL) --python $(BIN)/python --no-deps -e .
	@touch $@

setup: $(STAMP)

book: setup book-build
	@echo "Book: file://$(CURDIR)/_build/html/index.html"

# Two cores, used in turn by the gates. Beside them run what waits on the network and the disk (the
# torch-floor venv, Chromium) and the book build, at idle priority (SCHED_IDLE): they take only the
# cycles the gates leave and slow no gate down. Then the
# torch-floor tests and the browser test, side by side.
IDLE := $(shell chrt --idle 0 true 2>/dev/null && echo chrt --idle 0 || echo nice -n 19)
LOGS := _build/logs
# Each stage prints the minutes since `make test` began (the README's table of stage times).
export MAKE_TEST_T0 ?= $(shell date +%s)
done = @echo "[make test] $(1) done at $$(( ($$(date +%s) - $(MAKE_TEST_T0)) / 60 )) min $$(( ($$(date +%s) - $(MAKE_TEST_T0)) % 60 )) s"
test:
	$(MAKE) --no-print-directory setup
	$(call done,set-up)
	$(MAKE) --no-print-directory -j2 gates beside-gates
	$(MAKE) --no-print-directory -j2 --output-sync=target pytest-floor browser-test
	$(call done,torch floor and browser test)
	@echo "make test: all gates passed"

gates: setup
	$(MAKE) --no-print-directory export-check
	$(MAKE) --no-print-directory executed-check
	$(call done,export and executed-notebook gates)
	$(MAKE) --no-print-directory pytest-strict
	$(call done,strict pass (library tests and notebooks))
	$(MAKE) --no-print-directory pytest-nb-reader
	$(call done,second strict pass (other kernels))

# Output to logs, shown when a step fails, so that it does not interleave with the gates'.
beside-gates: setup
	@mkdir -p $(LOGS)
	@$(IDLE) $(MAKE) --no-print-directory -j2 floor-setup browser-setup > $(LOGS)/setups.log 2>&1 \
		|| { cat $(LOGS)/setups.log; exit 1; }
	@$(IDLE) $(MAKE) --no-print-directory book-build > $(LOGS)/book.log 2>&1 || { cat $(LOGS)/book.log; exit 1; }
	@echo "beside the gates: torch-floor venv and Chromium installed, book built with its demo (logs in $(LOGS))"
	$(call done,book build (beside the gates))

# 1. The library must be exactly what the notebooks export (stale or untracked modules fail).
export-check:
	$(BIN)/nbdev-export
	@if [ -n "$$(git status --porcelain -- transformer_lib)" ]; then \
		echo "transformer_lib differs from what the notebooks export:"; \
		git status --porcelain -- transformer_lib; git --no-pager diff --stat -- transformer_lib; exit 1; fi
	@echo "export gate: transformer_lib matches the notebooks"

# 2. Every code cell ran, top to bottom, in a fresh kernel (nbval passes unexecuted notebooks).
executed-check:
	$(BIN)/python tools/check_executed.py notebooks

# Parallel workers get one thread each: OpenMP threads oversubscribing the cores slow small
# models down by orders of magnitude (measured: 27 ms vs 2.6 s per training step).
WORKER_THREADS := OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1}

# 3. Library tests and notebooks, re-executed and compared with their stored outputs, in one
#    pytest run on two workers. xdist hands out whole files (--dist loadfile), each worker two at
#    the start, in the order given here (--no-loadscope-reorder): the capstone, the longest, with
#    a short notebook, the other worker two long ones, then the long test files, then the rest as
#    workers free up, so that they finish together. No notebook asserts on a clock: timings come
#    from bench/results/, so every chapter can run beside another.
LONGEST_NOTEBOOKS := $(wildcard notebooks/09_*.ipynb notebooks/10b_*.ipynb notebooks/00_*.ipynb \
	notebooks/07_*.ipynb notebooks/06b_*.ipynb)
NOTEBOOKS := $(LONGEST_NOTEBOOKS) $(filter-out $(LONGEST_NOTEBOOKS),$(wildcard notebooks/*.ipynb))
LONGEST_TESTS := tests/test_resume.py tests/test_train_cli.py
IN_ORDER := -n 2 --dist loadfile --no-loadscope-reorder
NBVAL = $(BIN)/python -m pytest $(NBVAL_MODE) --nbval-current-env --nbval-sanitize-with $(SANITIZE) -q -p no:cacheprovider
pytest-strict:
	$(WORKER_THREADS) $(NBVAL) $(IN_ORDER) $(NOTEBOOKS) $(LONGEST_TESTS) tests

# The same, one half at a time.
pytest-lib:
	$(WORKER_THREADS) $(BIN)/python -m pytest tests -n auto -q
pytest-nb:
	$(WORKER_THREADS) $(NBVAL) $(IN_ORDER) $(NOTEBOOKS)

# 3c. Every notebook again, compared with its stored outputs just as strictly, on kernels that
#     round like another processor: on an AVX-512 machine PyTorch's and MKL's AVX2 kernels (what
#     most laptops run: other rounding, same speed); elsewhere PyTorch's non-vectorized kernels.
#     So a stored output that one machine's rounding decides fails here, on the writer's machine,
#     not on the next reader's. One thread per worker, as in 3: two notebooks with two threads
#     each on two cores took 7.7 instead of 6.4 minutes here. The thread count's effect is checked
#     by tools/portability.py (all six settings, before every stop) and, for trained scores, by
#     bench/accuracy_spread.py's record, which the chapters assert against.
OTHER_CPU = $(shell $(BIN)/python -c "import torch; print('ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2' \
	if torch.backends.cpu.get_cpu_capability() == 'AVX512' else 'ATEN_CPU_CAPABILITY=default')")
READER = $(WORKER_THREADS) $(OTHER_CPU) $(NBVAL)
pytest-nb-reader:
	$(READER) $(IN_ORDER) $(NOTEBOOKS)

# 3d. The oldest torch that pyproject.toml allows: the library tests in a second venv.
#     PyPI's Linux wheels of that torch are CUDA builds; they run on a machine without a GPU.
#     (NumPy < 2: torch 2.2 was built against NumPy 1.)
TORCH_FLOOR := $(shell sed -n 's/.*"torch>=\([0-9.]*\)".*/\1/p' pyproject.toml)
FLOOR_VENV  := .venv-torch$(TORCH_FLOOR)
FLOOR_STAMP := $(FLOOR_VENV)/.installed
$(FLOOR_STAMP): pyproject.toml | $(STAMP)
	@test -x $(FLOOR_VENV)/bin/python || $(PYTHON) -m venv $(FLOOR_VENV)
	$(UV_INSTALL) --python $(FLOOR_VENV)/bin/python "torch==$(TORCH_FLOOR).*" "numpy<2" \
		$$(grep -iE '^(babel|pytest|pytest-xdist|hypothesis|psutil|graphviz|matplotlib)==' requirements.txt)
	$(UV_INSTALL) --python $(FLOOR_VENV)/bin/python --no-deps -e .
	@touch $@
floor-setup: setup $(FLOOR_STAMP)
# The longest test files first, so that the two workers finish together (2.4 -> 1.9 min here).
pytest-floor: $(FLOOR_STAMP)
	$(WORKER_THREADS) $(FLOOR_VENV)/bin/python -m pytest $(LONGEST_TESTS) tests -n auto -q -p no:cacheprovider \
		--ignore tests/test_contract.py --ignore tests/test_browser_test.py \
		--ignore tests/test_hide_machinery.py --ignore tests/test_alt_text.py
	@echo "torch floor: the library tests pass with torch $$($(FLOOR_VENV)/bin/python -c 'import torch; print(torch.__version__)')"

# 4. The HTML book, warnings are errors. First the live demo of chapter 9 (_build/demo, served as
#    _static/dates-demo/): the shipped model exported to ONNX, and onnxruntime-web as package-lock.json
#    pins it, installed by `npm ci` (Node and npm: Debian's, installed by node-setup when missing; in
#    `make test` after the other set-ups, so that two apt-get never wait on each other's lock).
node-setup:
	@command -v npm >/dev/null && exit 0; \
		echo "installing Debian's nodejs and npm for the book's demo"; \
		$(SUDO) apt-get update -qq; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
node_modules/.installed: package.json package-lock.json | node-setup
	npm ci --ignore-scripts --no-audit --no-fund
	@touch $@
demo: setup node_modules/.installed
	$(BIN)/python tools/build_demo.py

book-build: setup demo
	$(BIN)/python tools/draw_front_page.py
	$(BIN)/jupyter-book build . -W --keep-going

# Headless Chromium for the browser test (fonts-noto-cjk: the glossary's Chinese in screenshots).
browser-setup:
	@for c in $(CHROMIUM_CMDS); do command -v $$c >/dev/null && exit 0; done; \
		echo "installing Debian's chromium for the browser test"; \
		$(SUDO) apt-get update -qq; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk

# 5. Every page of the built book in headless Chromium: no JS errors, math typeset, images load,
#    the Colab link names the chapter (screenshots in _build/screenshots/).
browser-test: setup browser-setup
	$(BIN)/python tools/browser_test.py _build/html

# On a CUDA machine, in the *current* Python environment (it brings its own CUDA build of torch:
# no venv, nothing installed): the library tests, then every notebook's asserts (--nbval-lax), on
# GPU_WORKERS xdist workers sharing the GPU (the reference machine: 16 cores, one H200; 8 workers
# ran every notebook but chapter 8 in 83 s), each with two CPU threads.
GPU_PYTHON ?= python3
GPU_WORKERS ?= 8
GPU_PYTEST = PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_PYTHON) -m pytest -q -p no:cacheprovider
GPU_NBVAL = $(GPU_PYTEST) --nbval-lax --nbval-current-env
test-gpu:
	$(GPU_PYTHON) tools/check_environment.py --gpu
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(GPU_PYTEST) -n $(GPU_WORKERS) tests
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-2} $(GPU_NBVAL) -n $(GPU_WORKERS) --dist loadfile --no-loadscope-reorder \
		$(NOTEBOOKS)
	@echo "make test-gpu: all gates passed"

clean:
	rm -rf _build
