# The two ways in:
#   make run    execute every notebook (profile that fits this machine) -> outputs/runs/.../index.html
#   make test   the whole test suite
# and
#   make lab    JupyterLab on the notebooks (installs the lab extra first)
#   make clean  remove the environment and caches (keeps outputs/)
# Each creates or reuses the virtual environment (.venv, or VENV) and installs what it needs first.
#
# Variables (override on the command line, e.g. `make run PROFILE=tiny`):
#   PYTHON      interpreter that creates the venv               (python3)
#   VENV        the environment to create or reuse              (.venv)
#   VENV_ARGS   extra `python -m venv` options, e.g. --system-site-packages to reuse a host's torch
#   TORCH_SPEC  what pip installs for torch before sagelib       (torch==2.13.0)
#               empty = install nothing separately (keep the torch you have, or let pip choose)
#   PROFILE     parameter profile for `make run`: tiny, cpu, gpu (gpu where torch sees CUDA, else cpu)
#   RUN_ARGS    more `sagelib run` arguments, e.g. RUN_ARGS="--only 00_contract -p n_tokens=1024"
#   PYTEST_ARGS more pytest arguments, e.g. PYTEST_ARGS="-m 'not slow' tests/test_runner.py"
#   LAB_ARGS    more `jupyter lab` arguments, e.g. LAB_ARGS="--no-browser --port 8888 --ip 0.0.0.0" on a remote host

PYTHON ?= python3
VENV ?= .venv
VENV_ARGS ?=
TORCH_SPEC ?= torch==2.13.0
PROFILE ?=
RUN_ARGS ?=
PYTEST_ARGS ?=
LAB_ARGS ?=

BIN := $(VENV)/bin
# One stamp per torch spec, so changing TORCH_SPEC installs again; the sagelib
# stamp is newer than pyproject.toml once its dependencies are installed.
TORCH_STAMP := $(VENV)/.installed-torch-$(shell printf '%s' '$(TORCH_SPEC)' | tr -c 'A-Za-z0-9.' '_')
SAGELIB_STAMP := $(VENV)/.installed-sagelib
LAB_STAMP := $(VENV)/.installed-lab

.PHONY: help run test lab clean

help:
	@awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' Makefile

$(BIN)/python:
	$(PYTHON) -m venv $(VENV_ARGS) $(VENV)

$(TORCH_STAMP): | $(BIN)/python
	@if [ -n '$(TORCH_SPEC)' ]; then \
	  echo "installing $(TORCH_SPEC) (set TORCH_SPEC to change; see README)"; \
	  $(BIN)/python -m pip install '$(TORCH_SPEC)'; \
	fi
	@rm -f $(VENV)/.installed-torch-*
	@touch $@

$(SAGELIB_STAMP): pyproject.toml $(TORCH_STAMP)
	$(BIN)/python -m pip install -e '.[test]'
	@touch $@

$(LAB_STAMP): $(SAGELIB_STAMP)
	$(BIN)/python -m pip install -e '.[lab]'
	@touch $@

run: $(SAGELIB_STAMP)
	@profile='$(PROFILE)'; \
	if [ -z "$$profile" ]; then \
	  profile=$$($(BIN)/python -c 'from sagelib.run.parameters import default_profile; print(default_profile())'); \
	fi; \
	echo "$(BIN)/sagelib run --profile $$profile $(RUN_ARGS)"; \
	$(BIN)/sagelib run --profile "$$profile" $(RUN_ARGS)

test: $(SAGELIB_STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lab: $(LAB_STAMP)
	$(BIN)/jupyter lab $(LAB_ARGS)

# Removes the environment and caches; keeps outputs/ (your runs).
clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
