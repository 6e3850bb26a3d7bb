#!/usr/bin/env bash
# Print the interpreter for one controller lane of the support matrix, or nothing if absent.
#   find-python.sh new   newest CPython >= 3.12 (ansible-core 2.20+ needs it)
#   find-python.sh old   CPython 3.11 (ansible-core 2.19)
#   find-python.sh 3.12  CPython 3.12 (the ansible-core 2.20 lane: the oldest Python 2.20 supports)
# Looks on PATH first, then in pyenv's versions directory (pyenv shims for non-global
# versions are not runnable, so they are resolved to the real binaries).
set -euo pipefail
lane=${1:?usage: find-python.sh new|old|3.12}
case "$lane" in
  new) wanted=(3.14 3.13 3.12) ;;
  old) wanted=(3.11) ;;
  3.12) wanted=(3.12) ;;
  *) echo "usage: find-python.sh new|old|3.12" >&2; exit 2 ;;
esac
pyenv_root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
for minor in "${wanted[@]}"; do
  candidates=()
  for dir in "$pyenv_root"/versions/"$minor".*; do
    [ -x "$dir/bin/python" ] && candidates+=("$dir/bin/python")
  done
  if command -v "python$minor" >/dev/null 2>&1; then candidates+=("$(command -v "python$minor")"); fi
  for py in "${candidates[@]}"; do
    if "$py" -c 'import sys, venv' >/dev/null 2>&1; then echo "$py"; exit 0; fi
  done
done
exit 0
