"""What every lab emulator shares: its command line, free ports, and a clean shutdown.

The contract (labctl relies on it): ``python -m lab.<platform>.server --host H --port N
[--delay-scale F] [--state-dir DIR]`` listens on H:N, serves until SIGTERM/SIGINT, then exits 0.
``F`` multiplies every simulated platform delay (0 = instant transitions). ``--state-dir`` is
where an emulator may write files a client needs (kubeconfigs, CA certificates).

The lab is the package ``lab`` in ``tests/``, imported with ``tests/`` on the path and nothing else:
pytest adds it (``pythonpath`` in pyproject.toml), the command line sets ``PYTHONPATH=tests``, and
an emulator started as its own process gets it from ``lab_environment``. An emulator runs as a
module (``-m``), never as a file: a file run as a script puts its own directory first on the path,
where the lab's module names (``state``, ``server``, ``vultr``, ...) would shadow a library's.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType

LOOPBACK = "127.0.0.1"
# The directory that holds the ``lab`` package: what a process needs on its path to import ``lab.*``.
TESTS_DIR = Path(__file__).resolve().parents[2]


def lab_command(module: str, *args: str) -> list[str]:
    """``python -m <module> ARGS`` with this interpreter: how labctl, emulators and tests are started."""
    return [sys.executable, "-m", module, *args]


def lab_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``tests/`` first on PYTHONPATH.

    The child imports ``lab.*`` exactly as pytest and ``PYTHONPATH=tests`` do, whatever its working
    directory; any PYTHONPATH already set stays after it.
    """
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS_DIR), env.get("PYTHONPATH", "")) if p)
    return env


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that was free a moment ago (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def emulator_arguments(description: str) -> argparse.ArgumentParser:
    """The standard emulator command line; scripts may add their own options."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default=LOOPBACK, help="address to listen on (default %(default)s)")
    parser.add_argument("--port", type=int, required=True, help="TCP port to listen on")
    parser.add_argument(
        "--delay-scale",
        type=float,
        default=1.0,
        help="multiplies every simulated platform delay; 0 makes transitions instant",
    )
    parser.add_argument("--state-dir", type=Path, default=None, help="where to write client files")
    return parser


def serve_until_signalled(shutdown: Callable[[], None]) -> None:
    """Block the main thread until SIGTERM or SIGINT, then call ``shutdown`` once."""
    stop = threading.Event()

    def _on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    stop.wait()
    shutdown()
