# `make run`: set up the core and run the default workload.
# `make test`: set up everything (all extras) and run ruff, mypy and the tests. As root on a
# machine with apt-get and no slurmctld, it also installs Slurm from Debian (slurm-wlm's
# slurmctld, slurmd and slurm-client: about 20 s) for tests/slurm (a real srun and sbatch on
# 127.0.0.1); elsewhere those tests skip. That install runs beside the venv's (-j2): 13-21 s
# off a fresh clone's `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# An unpinned torch pulls a multi-GB CUDA build; 2.13.0 is the tested CPU wheel.
TORCH := torch==2.13.0

.PHONY: run test lint clean-data help slurm-for-tests cluster-for-tests

help:
	@echo "make run   - install the core (with torch and mpi) into .venv and run workloads/default.yaml"
	@echo "make test  - install all extras into .venv, run ruff, mypy and pytest"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# the C extension is built by pip: a changed source rebuilds it
EXT := setup.py $(wildcard dliobench/storage/*.c dliobench/storage/*.h)

# the core plus the torch and mpi extras: the README's quick start (the pytorch loader, the
# bundled mpiexec) works right after `make run`
$(VENV)/.core: pyproject.toml $(EXT) | $(BIN)/python
	$(BIN)/pip install -q -e '.[torch,mpi]' $(TORCH)
	touch $@

$(VENV)/.all: pyproject.toml $(EXT) | $(BIN)/python
	$(BIN)/pip install -q -e '.[torch,dali,mpi,dev,parquet,tensorflow,s3,trace,jpeg,vectordb,milvus]' $(TORCH)
	touch $@ $(VENV)/.core

run: $(VENV)/.core
	$(BIN)/dliobench run workloads/default.yaml

lint: $(VENV)/.all
	$(BIN)/ruff check dliobench tests benchmarks
	$(BIN)/mypy dliobench

slurm-for-tests:
	@if ! command -v slurmctld >/dev/null && command -v apt-get >/dev/null \
	    && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	    --no-install-recommends slurmctld slurmd slurm-client) >/dev/null 2>&1 \
	    || echo "could not install Slurm (slurmctld, slurmd): tests/slurm will skip"; fi

# the emulated cluster's sshd and GlusterFS (dliobench nodes up; tests/cluster)
cluster-for-tests: slurm-for-tests  # after it: one apt-get at a time
	@if { ! [ -x /usr/sbin/sshd ] || ! command -v glusterd >/dev/null; } \
	    && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
	    --no-install-recommends openssh-server glusterfs-server) >/dev/null 2>&1 \
	    || echo "could not install openssh-server, glusterfs-server: tests/cluster will skip"; fi

# Two workers (pytest-xdist) for the tests that may share the machine, then the `serial` ones
# alone (time-sensitive verdicts; tests/slurm and tests/cluster: fixed daemons and names).
# The tests keep a core busy about half the time: two workers took pytest from 350 s to
# ~200 s on this 2-core machine.
test:
	@$(MAKE) --no-print-directory -j2 lint slurm-for-tests cluster-for-tests
	$(BIN)/pytest -n 2 -m "not serial"
	$(BIN)/pytest -m serial

clean-data:
	rm -rf data reports/*/
