"""What every lab emulator shares: its command line, free ports, and a clean shutdown.

The contract (labctl relies on it): ``python tests/lab/<name>.py --host H --port N
[--delay-scale F] [--state-dir DIR]`` listens on H:N, serves until SIGTERM/SIGINT, then exits 0.
``F`` multiplies every simulated platform delay (0 = instant transitions). ``--state-dir`` is
where an emulator may write files a client needs (kubeconfigs, CA certificates).

Emulator scripts start with::

    import sys
    from pathlib import Path
    sys.path[0] = str(Path(__file__).resolve().parents[1])   # import as ``lab.*``, never shadow
                                                             # a library with a script's name

because ``tests/lab/vultr.py`` would otherwise shadow the ``vultr`` package of vultr-python.
"""

from __future__ import annotations

import argparse
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

LOOPBACK = "127.0.0.1"


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
