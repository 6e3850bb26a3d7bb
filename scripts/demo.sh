#!/usr/bin/env bash
# make demo: the collection's main job on the lab digital twin, start to finish.
#   lab up -> tour up -> tour up again (must change nothing) -> tour down -> lab down
# Exits non-zero on any failure; the lab is stopped whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
py=$root/.venv/bin/python
export ANSIBLE_COLLECTIONS_PATH=$root/.build/collections
export ANSIBLE_NOCOLOR=1
state_dir=${LAB_STATE_DIR:-$root/inventories/lab/.state}
export LAB_STATE_DIR=$state_dir
delay_scale=${LAB_DELAY_SCALE:-0.05}   # the twin's platform delays, scaled for a demo

declare -a timeline=()
step() {  # step <name> <command...>: run, time and record one phase
  local name=$1; shift
  local started=$SECONDS
  echo; echo "=== $name"
  "$@"
  timeline+=("$(printf '%-38s %4ds' "$name" $((SECONDS - started)))")
}

playbook() {
  "$root/.venv/bin/ansible-playbook" -i inventories/lab playbooks/lab_tour.yml "$@"
}

second_run_changes_nothing() {
  local log
  log=$(mktemp)
  playbook | tee "$log"
  if grep -E '^localhost +:.*changed=[1-9]' "$log" >/dev/null; then
    echo "demo: the second run changed something; it must be idempotent" >&2
    rm -f "$log"; return 1
  fi
  rm -f "$log"
}

trap '"$py" tests/lab/labctl.py down --state-dir "$state_dir" >/dev/null || true' EXIT
step "lab up (delay scale $delay_scale)" "$py" tests/lab/labctl.py up --state-dir "$state_dir" --delay-scale "$delay_scale"
step "tour up" playbook
step "tour up again (expects changed=0)" second_run_changes_nothing
step "tour down" playbook -e tour_state=absent
step "lab down" "$py" tests/lab/labctl.py down --state-dir "$state_dir"
trap - EXIT

echo; echo "=== demo timeline"
printf '%s\n' "${timeline[@]}"
