#!/usr/bin/env bash
# make demo: the collection's main job on the lab digital twin, start to finish.
#   lab up -> site.yml (up) -> site.yml again (must change nothing) -> down.yml -> lab down
# Both paths, in one run of the same playbook:
# - one VKE cluster with an A16 and an L40S pool is provisioned, its GPU stack validated;
# - one bare-metal cluster (lab-r730) claims the simulated R730 behind the iDRAC8 BMC, installs it from an ISO over
#   virtual media, then gets the NVIDIA driver, kubeadm with Cilium;
# each gets Longhorn RWX storage, is adopted into Modelplane and proven to serve (one chat completion through the
# gateway, phase smoke); then all of it is taken away and the server goes back to its pool, powered off.
# The timeline callback prints seconds per cluster and phase, and writes JSON + HTML reports to
# .build/demo/timeline-{up,down}/. Exits non-zero on any failure; the lab is stopped whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=$root/.venv/bin/python
export ANSIBLE_COLLECTIONS_PATH=$root/.build/collections
export ANSIBLE_NOCOLOR=1
export ANSIBLE_CALLBACKS_ENABLED=metalplane.inference.timeline
state_dir=${LAB_STATE_DIR:-$root/inventories/lab/.state}
export LAB_STATE_DIR=$state_dir
delay_scale=${LAB_DELAY_SCALE:-0.05}   # the twin's platform delays, scaled for a demo
reports=$root/.build/demo

declare -a timeline=()
step() {  # step <name> <command...>: run, time and record one step
  local name=$1; shift
  local started=$SECONDS
  echo; echo "=== $name"
  "$@"
  timeline+=("$(printf '%-44s %4ds' "$name" $((SECONDS - started)))")
}

labctl() {  # labctl up|status|down [args...]: the lab is the package ``lab`` in tests/ (docs/lab/index.md)
  PYTHONPATH=$root/tests "$py" -m lab.labctl "$@"
}

playbook() {  # playbook <report dir> <playbook> [args...]
  local out=$1; shift
  METALPLANE_TIMELINE_DIR=$reports/$out "$root/.venv/bin/ansible-playbook" -i inventories/lab "$@"
}

second_run_changes_nothing() {
  local log
  log=$(mktemp)
  playbook timeline-again playbooks/site.yml | tee "$log"
  if grep -E '^[a-z0-9.-]+ +:.*changed=[1-9]' "$log" >/dev/null; then
    echo "demo: the second run changed something; it must be idempotent" >&2
    rm -f "$log"; return 1
  fi
  rm -f "$log"
}

trap 'labctl down --state-dir "$state_dir" >/dev/null || true' EXIT
step "lab up (delay scale $delay_scale)" labctl up --state-dir "$state_dir" --delay-scale "$delay_scale"
step "site.yml: up" playbook timeline-up playbooks/site.yml
step "site.yml again (expects changed=0)" second_run_changes_nothing
step "down.yml" playbook timeline-down playbooks/down.yml
step "lab down" labctl down --state-dir "$state_dir"
trap - EXIT

echo; echo "=== demo timeline"
printf '%s\n' "${timeline[@]}"
echo "reports: $reports/timeline-up/timeline.html, $reports/timeline-down/timeline.html"
