# The real kube-apiserver lane (issue 5): a Kubernetes v1.20.2 control plane built from Debian's
# source package, run on loopback with a fake GPU kubelet. Opt-in and slow; NOT part of `make test`.
# Included from the main Makefile with:   include mk/k8s-real.mk
# Documentation: docs/testing/k8s-real.md
#
#   make test-k8s-real    build once (~6 min, cached outside the repo), start the lane, run the
#                         Kubernetes suites against it, always stop the lane
#   make k8s-real-build   only the build (skipped when the binaries are cached)
#   make k8s-real-up / k8s-real-status / k8s-real-down   drive the lane by hand (status prints the
#                         lane-control URL; tests read it from lane.json next to the kubeconfig)

VENV ?= .venv
# Prerequisite that creates $(VENV); the main Makefile's `venv` target.
K8S_REAL_VENV_DEP ?= venv
K8S_REAL_VERSION ?= v1.20.2
K8S_REAL_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/metalplane/k8s-real
K8S_REAL_STATE ?= $(K8S_REAL_CACHE)/run
K8S_REAL_NODES ?= 2
K8S_REAL_GPUS ?= 8
# Suites run against the lane (those that exist); each honours MP_KUBE_TARGET / MP_REAL_KUBECONFIG.
K8S_REAL_SUITES ?= tests/integration/kube_conformance tests/integration/kube tests/k8s_real
K8S_REAL_MARKERS ?= not emulator_only
K8S_REAL_PYTEST_ARGS ?=

K8S_REAL_ENV = K8S_REAL_CACHE="$(K8S_REAL_CACHE)" K8S_REAL_VERSION="$(K8S_REAL_VERSION)"
K8S_REAL_LANE = $(K8S_REAL_ENV) $(VENV)/bin/python scripts/k8s-real/lane.py
K8S_REAL_LANE_ARGS = --state-dir "$(K8S_REAL_STATE)" --nodes $(K8S_REAL_NODES) --gpus $(K8S_REAL_GPUS)

.PHONY: test-k8s-real k8s-real-build k8s-real-up k8s-real-status k8s-real-down

k8s-real-build:
	$(K8S_REAL_ENV) scripts/k8s-real/build.sh

# `lane.py run` starts the lane, runs pytest with MP_KUBE_TARGET=real,
# MP_REAL_KUBECONFIG=<state>/kubeconfig and MP_REAL_LANE_CONTROL=<lane-control URL: apiserver
# outages, dropped watches, the audit request record, fake-kubelet nodes and pod rules>, and stops
# every process it started whatever pytest did (also on Ctrl-C / SIGTERM); the recipe's exit status
# is pytest's.
test-k8s-real: $(K8S_REAL_VENV_DEP) k8s-real-build
	$(K8S_REAL_LANE) run $(K8S_REAL_LANE_ARGS) -- \
		$(VENV)/bin/pytest $(wildcard $(K8S_REAL_SUITES)) -m "$(K8S_REAL_MARKERS)" $(K8S_REAL_PYTEST_ARGS)

k8s-real-up: $(K8S_REAL_VENV_DEP) k8s-real-build
	$(K8S_REAL_LANE) start $(K8S_REAL_LANE_ARGS)

k8s-real-status:
	$(K8S_REAL_LANE) status --state-dir "$(K8S_REAL_STATE)"

k8s-real-down:
	$(K8S_REAL_LANE) stop --state-dir "$(K8S_REAL_STATE)"
