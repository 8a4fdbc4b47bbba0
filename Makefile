# kubelab: the two commands of the README, and the steps they are made of.
#   make lab   set up, bring up the multi-node lab, run the demo
#   make test  set up, then lint, type-check, check layering, run every test
# `make setup` is idempotent: a second run changes nothing and says so.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kubelab-installed

# Everything the project needs from Debian, by package name (shellcheck and ruby check the
# Vagrant lab's scripts and Vagrantfile in `make test`; docker-registry is the CNCF
# distribution registry the lab runs inside its own network, never as the host's service).
APT_PACKAGES := python3 python3-venv python3-dev gcc libc6-dev make git \
	containerd runc iptables conntrack iproute2 busybox-static umoci skopeo \
	containernetworking-plugins etcd-server etcd-client iputils-ping curl mmdebstrap \
	shellcheck ruby docker-registry

.PHONY: setup system-packages venv proto test lint typecheck contracts unit lab bench

setup: system-packages venv proto

system-packages:
	@missing=""; \
	for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then \
		echo "setup: system packages already installed"; \
	else \
		echo "setup: installing$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi; \
	if systemctl is-enabled --quiet docker-registry 2>/dev/null || pgrep -u docker-registry -x docker-registry >/dev/null; then \
		echo "setup: docker-registry's host service stopped and disabled (the lab runs its own, inside its network)"; \
		systemctl disable --now docker-registry >/dev/null 2>&1 || \
			{ service docker-registry stop; update-rc.d docker-registry disable; } >/dev/null 2>&1 || true; \
	fi

venv:
	@if [ -f $(STAMP) ] && [ $(STAMP) -nt pyproject.toml ]; then \
		echo "setup: $(VENV) already up to date"; \
	else \
		echo "setup: installing kubelab and its dev tools into $(VENV)"; \
		{ [ -x $(PY) ] || $(PYTHON) -m venv $(VENV); } && \
		$(PY) -m pip install -q --upgrade pip && \
		$(PY) -m pip install -q -e '.[dev]' && \
		touch $(STAMP); \
	fi

proto:
	@if $(PY) proto/generate.py --check >/dev/null 2>&1; then \
		echo "setup: CRI stubs already generated"; \
	else \
		echo "setup: generating CRI stubs from proto/"; \
		$(PY) proto/generate.py; \
	fi

lint:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck:
	$(PY) -m mypy

contracts:
	$(VENV)/bin/lint-imports

# Two phases: every test but the lab suites on 4 workers (most of their time is waiting on
# servers and kubectl; a file's tests stay together so its module-scoped servers start once),
# then the lab suites one at a time (labs have fixed names and host ports, and their timings
# are asserted).  Both phases run whatever the first one says; either failing fails `unit`.
unit:
	@status=0; \
	$(PY) -m pytest -n 4 --dist loadfile -m "not lab" || status=$$?; \
	$(PY) -m pytest -m lab || status=$$?; \
	exit $$status

test: setup lint typecheck contracts unit

bench: setup
	$(PY) -m bench

lab: setup
	$(VENV)/bin/kubelab lab up
	$(VENV)/bin/kubelab lab demo
