"""Offline stand-in for ansible-test's pip bootstrap script (``get_pip_X_Y.py``).

Why: ansible-test creates a bare virtualenv per sanity test and installs pip into it by running
``~/.ansible/test/cache/get_pip_X_Y.py``, which it otherwise downloads from a host this machine
cannot reach. This shim does what the official script does with its embedded pip: it runs
``pip install`` from the ``pip-X.Y-py3-none-any.whl`` lying beside it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve()
    match = re.fullmatch(r"get_pip_(\d+)_(\d+)\.py", here.name)
    if not match:
        sys.exit(f"{here.name}: expected a name like get_pip_25_2.py")
    version = f"{match.group(1)}.{match.group(2)}"
    wheel = here.with_name(f"pip-{version}-py3-none-any.whl")
    if not wheel.is_file():
        sys.exit(f"{wheel} is missing: run scripts/ansible-test-offline.sh")
    sys.path.insert(0, str(wheel))
    from pip._internal.cli.main import main as pip_main

    args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
    return int(pip_main(["install", "--upgrade", "--no-warn-script-location", *args, str(wheel)]) or 0)


if __name__ == "__main__":
    sys.exit(main())
