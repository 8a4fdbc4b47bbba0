# kubelab: the two commands of the README, and the steps they are made of.
#   make lab   set up, bring up the multi-node lab, run the demo
#   make test  set up, then lint, type-check, check layering, run every test but the long
#              lab suites
#   make test-long  the long lab suites (the HA lab's faults and topology, the HPA walkthrough)
# `make setup` is idempotent: a second run changes nothing and says so.
# The lab on VMs (vagrant/README.md), never part of `make test`:
#   make vagrant-setup  libvirt and Vagrant, the VMs' wheels, the offline box (added to Vagrant)
#   make vagrant-lab    the lab on three VMs, checked end to end, then destroyed

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kubelab-installed

# Everything the project needs from Debian, by package name (shellcheck and ruby check the
# Vagrant lab's scripts and Vagrantfile in `make test`; docker-registry is the CNCF
# distribution registry the lab runs inside its own network, never as the host's service).
APT_PACKAGES := python3 python3-venv python3-dev gcc libc6-dev make git \
	containerd runc iptables nftables conntrack iproute2 busybox-static umoci skopeo \
	containernetworking-plugins etcd-server etcd-client iputils-ping curl mmdebstrap \
	shellcheck ruby docker-registry chromium chromium-driver

# What a host needs to run the lab's VMs on libvirt (with `kubelab vagrant`, libvirtd in a
# network namespace) and to build their box (mmdebstrap, sfdisk from fdisk, qemu-img).
VAGRANT_PACKAGES := vagrant vagrant-libvirt qemu-system-x86 qemu-utils libvirt-daemon-system \
	libvirt-daemon-driver-qemu libvirt-clients dnsmasq-base ebtables fdisk mmdebstrap
VAGRANT_BOX := $(shell sed -n 's/^box: *//p' vagrant/inventory.yaml)
BOX_FILE := vagrant/.box/$(VAGRANT_BOX).box
BOX_ADDED := vagrant/.box/$(VAGRANT_BOX).added
WHEELS := vagrant/.wheels
CLIENT_E2E := .client-e2e

.PHONY: setup system-packages venv proto test test-long lint typecheck contracts unit lab bench client-e2e ui-vendor \
	vagrant-setup vagrant-packages vagrant-wheels vagrant-box vagrant-lab

setup: system-packages venv proto ui-vendor

# $(call apt_install,PACKAGES,WHAT): installs whichever of PACKAGES is missing.
define apt_install
	@missing=""; \
	for p in $(1); do \
		dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then \
		echo "setup: $(2) already installed"; \
	else \
		echo "setup: installing$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
endef

system-packages:
	$(call apt_install,$(APT_PACKAGES),system packages)
	@if systemctl is-enabled --quiet docker-registry 2>/dev/null || pgrep -u docker-registry -x docker-registry >/dev/null; then \
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

# kubelab lab ui's drawing libraries, from npm at the versions package-lock.json pins, copied
# into the package (the page loads nothing from elsewhere at run time).  The machine's npm, or
# Debian's where there is none.
UI := kubelab/lab/ui
UI_VENDOR := $(UI)/static/vendor
ui-vendor:
	@command -v npm >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm; }
	@if [ -f $(UI_VENDOR)/cytoscape-dagre.min.js ] && [ $(UI_VENDOR)/cytoscape-dagre.min.js -nt $(UI)/package-lock.json ]; then \
		echo "setup: Cytoscape.js already vendored into $(UI_VENDOR)"; \
	else \
		echo "setup: vendoring Cytoscape.js and cytoscape-dagre from npm into $(UI_VENDOR)"; \
		npm ci --prefix $(UI) --no-audit --no-fund --silent && \
		mkdir -p $(UI_VENDOR) && \
		cp $(UI)/node_modules/cytoscape/dist/cytoscape.min.js $(UI_VENDOR)/ && \
		cp $(UI)/node_modules/cytoscape/LICENSE $(UI_VENDOR)/cytoscape.LICENSE && \
		cp $(UI)/node_modules/cytoscape-dagre/LICENSE $(UI_VENDOR)/cytoscape-dagre.LICENSE && \
		cp $(UI)/node_modules/cytoscape-dagre/dist/cytoscape-dagre.min.js $(UI_VENDOR)/; \
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
# then the lab suites but the long ones, one at a time (labs have fixed names and host ports,
# and their timings are asserted).  Both phases run whatever the first one says; either failing fails `unit`.
unit:
	@status=0; \
	$(PY) -m pytest -n 4 --dist loadfile -m "not lab" || status=$$?; \
	$(PY) -m pytest -m "lab and not long" || status=$$?; \
	exit $$status

test: setup lint typecheck contracts unit

# The lab suites too long for `make test`'s time in CI (marked `long`): the HA lab (three
# control planes and etcd) with its faults and topology, and the HPA walkthrough.
test-long: setup
	$(PY) -m pytest -m long

# The official Python client's own e2e suite against `kubelab server`
# (tests/controlplane/apiserver/test_client_e2e.py): the suite is in neither the client's wheel
# nor its sdist, so it comes from a clone of kubernetes-client/python, at the installed
# client's tag: make client-e2e CLIENT_GIT=path/to/python(.git)
client-e2e: setup
	@test -n "$(CLIENT_GIT)" || { echo "client-e2e: CLIENT_GIT=path/to/a/clone/of/kubernetes-client/python"; exit 2; }
	rm -rf $(CLIENT_E2E) && mkdir -p $(CLIENT_E2E)
	git -C $(CLIENT_GIT) archive "v$$($(PY) -c 'import kubernetes; print(kubernetes.__version__)')" kubernetes/e2e_test | tar -x -C $(CLIENT_E2E)
	KUBELAB_CLIENT_E2E=$(CURDIR)/$(CLIENT_E2E) $(PY) -m pytest -p no:cacheprovider tests/controlplane/apiserver/test_client_e2e.py

bench: setup
	$(PY) -m bench

lab: setup
	$(VENV)/bin/kubelab lab up
	$(VENV)/bin/kubelab lab demo

vagrant-setup: setup vagrant-packages vagrant-wheels vagrant-box

vagrant-packages:
	$(call apt_install,$(VAGRANT_PACKAGES),Vagrant and libvirt packages)

# kubelab's dependencies (and kubectl, and the build backend for an editable install) as
# wheels, which the VMs install from the synced folder with pip and no index.
vagrant-wheels: setup $(WHEELS)/.complete

$(WHEELS)/.complete: pyproject.toml
	rm -rf $(WHEELS)
	$(PY) -m pip wheel --quiet --wheel-dir $(WHEELS) '.[kubectl]' setuptools wheel
	touch $@

# The offline box (vagrant/box/build.sh), added to Vagrant under the inventory's box name.
vagrant-box: vagrant-packages $(BOX_FILE)
	@if [ $(BOX_ADDED) -nt $(BOX_FILE) ] && vagrant box list | grep -q '^$(VAGRANT_BOX) '; then \
		echo "setup: box $(VAGRANT_BOX) already added"; \
	else \
		vagrant box add --force --name $(VAGRANT_BOX) $(BOX_FILE) && touch $(BOX_ADDED); \
	fi

$(BOX_FILE): vagrant/node-packages $(wildcard vagrant/box/*)
	vagrant/box/build.sh $@

# Tens of minutes under TCG: the control plane and two workers as VMs, a Deployment across
# the workers reached through its Service, then everything destroyed (vagrant/check-lab.sh).
vagrant-lab: vagrant-setup
	vagrant/check-lab.sh
