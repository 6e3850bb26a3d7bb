# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A short-lived HTTP server on the controller that serves one host's ISO to its BMC, and nothing else.

Why: the BMC's virtual media reads the ISO over HTTP by ranges (iDRAC issues HEAD, then Range GETs), and the ISO
holds that host's secrets (root password hash, SSH host key). So the server binds only the address the user
names, answers only ``/<random token>/<iso name>`` (HEAD and GET, single byte ranges, RFC 9110 section 14),
answers 404 for anything else, and stops on its own when the ISO is deleted (after eject) or its lifetime ends.

The module runs it as a detached process, so it outlives the task that started it: ``start`` launches this
file's source with the same Python (``python -c <source> ...``; the module's own files vanish when the task
ends), writes a pid file beside the ISO, and ``stop`` ends that process (only after checking that the pid
still is this server for this ISO). Standard library only, so the detached copy needs nothing installed.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

SERVER_MARKER = "metalplane-iso-server"  # in the detached process's argv: how stop() recognises it
CHUNK = 1024 * 1024
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
FILE_WATCH_SECONDS = 1.0  # how often the detached server checks that its ISO still exists
START_TIMEOUT = 10.0  # seconds to wait for the detached server to answer before calling the start failed


def parse_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """(first, last) inclusive for a single byte range; None without a header; "invalid" when unsatisfiable."""
    if not header:
        return None
    match = _RANGE.match(header.strip())
    if not match or (not match.group(1) and not match.group(2)):
        return "invalid"
    first, last = match.group(1), match.group(2)
    if not first:  # suffix range: the last N bytes
        length = int(last)
        if length == 0:
            return "invalid"
        return max(0, size - length), size - 1
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start >= size or end < start:
        return "invalid"
    return start, end


class IsoHandler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.iso_path`` at ``server.url_path``; 404 for every other path."""

    server_version = "metalplane-iso/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _target(self) -> Path | None:
        path = urllib.parse.urlsplit(self.path).path
        iso: Path = self.server.iso_path  # type: ignore[attr-defined]
        if path != self.server.url_path or not iso.is_file():  # type: ignore[attr-defined]
            return None
        return iso

    def _not_found(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _refuse(self) -> None:
        self.send_response(405)
        self.send_header("Allow", "GET, HEAD")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

    def _serve(self, *, body: bool) -> None:
        iso = self._target()
        if iso is None:
            self._not_found()
            return
        size = iso.stat().st_size
        wanted = parse_range(self.headers.get("Range"), size)
        if wanted == "invalid":
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        first, last = (0, size - 1) if wanted is None else wanted  # type: ignore[misc]
        self.send_response(200 if wanted is None else 206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(last - first + 1))
        if wanted is not None:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.end_headers()
        if not body:
            return
        with iso.open("rb") as handle:
            handle.seek(first)
            remaining = last - first + 1
            while remaining > 0:
                chunk = handle.read(min(CHUNK, remaining))
                if not chunk:
                    break
                try:
                    self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    return
                remaining -= len(chunk)


class IsoServer(http.server.ThreadingHTTPServer):
    """One ISO at one URL path; ``url`` is what the BMC is given."""

    daemon_threads = True

    def __init__(self, address: str, port: int, iso_path: Path, token: str) -> None:
        self.address_family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self.iso_path = iso_path
        self.url_path = f"/{token}/{urllib.parse.quote(iso_path.name)}"
        super().__init__((address, port), IsoHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[0], self.server_address[1]
        host = f"[{host}]" if ":" in str(host) else host
        return f"http://{host}:{port}{self.url_path}"


def serve(address: str, port: int, iso: Path, token: str, lifetime: float) -> None:
    """Serve until the ISO is deleted, the lifetime ends, or SIGTERM."""
    server = IsoServer(address, port, iso, token)
    deadline = time.monotonic() + lifetime
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())

    def watch() -> None:
        while time.monotonic() < deadline and iso.exists():
            time.sleep(FILE_WATCH_SECONDS)
        server.shutdown()

    threading.Thread(target=watch, daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


# ------------------------------------------------------------------------------------------------
# Controller side: start, find and stop the detached server.


def pid_file(iso: Path) -> Path:
    return iso.with_name(f"{iso.name}.server.json")


def _own_source() -> str:
    import inspect

    with contextlib.suppress(OSError, TypeError):
        return inspect.getsource(sys.modules[__name__])
    return Path(__file__).read_text()


def _is_ours(pid: int, iso: Path) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():
        args = cmdline.read_bytes().split(b"\0")
        return SERVER_MARKER.encode() in args and str(iso).encode() in args
    return True  # no /proc (macOS): the pid file is all there is


def running(iso: Path) -> dict[str, Any] | None:
    """The pid file's record when its process still serves this ISO."""
    path = pid_file(iso)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and _is_ours(int(record.get("pid", 0)), iso) else None


def start(iso: Path, address: str, port: int, lifetime: int) -> dict[str, Any]:
    """Start the detached server for ``iso``; its record (pid, address, port, url; no secret but the URL token)."""
    from ansible.module_utils.urls import open_url  # here: the detached server runs this file without Ansible

    token = secrets.token_hex(16)
    log = iso.with_name(f"{iso.name}.server.log")
    argv = [sys.executable, "-c", _own_source(), SERVER_MARKER, str(iso), address, str(port), token, str(lifetime)]
    # A detached child, not run_command: the server must outlive this module run (it stops on eject,
    # on its lifetime or on state=absent), and run_command waits for the command to end.
    with log.open("wb") as out:
        process = subprocess.Popen(  # pylint: disable=ansible-bad-function
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, close_fds=True
        )
    url = f"http://{'[' + address + ']' if ':' in address else address}:{port}/{token}/{urllib.parse.quote(iso.name)}"
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            reason = log.read_text(errors="replace").strip().splitlines()
            raise OSError(f"the ISO server exited at start: {reason[-1] if reason else process.returncode}")
        try:
            with open_url(url, method="HEAD", timeout=2, validate_certs=False):
                break
        except OSError:
            time.sleep(0.1)
    else:
        process.terminate()
        raise OSError(f"the ISO server did not answer on {address}:{port} within {START_TIMEOUT:.0f} s")
    record = {"pid": process.pid, "address": address, "port": port, "url": url, "lifetime": lifetime}
    pid_file(iso).write_text(json.dumps(record))
    return record


def stop(iso: Path) -> bool:
    """Stop the server of ``iso`` if it runs; remove its pid and log files. True when a process was stopped."""
    record = running(iso)
    stopped = False
    if record is not None:
        pid = int(record["pid"])
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
            stopped = True
        for _unused in range(50):
            if not _is_ours(pid, iso):
                break
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    for leftover in (pid_file(iso), iso.with_name(f"{iso.name}.server.log")):
        leftover.unlink(missing_ok=True)
    return stopped


def _main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description="serve one ISO to a BMC")
    parser.add_argument("marker")
    parser.add_argument("iso", type=Path)
    parser.add_argument("address")
    parser.add_argument("port", type=int)
    parser.add_argument("token")
    parser.add_argument("lifetime", type=float)
    args = parser.parse_args(argv)
    serve(args.address, args.port, args.iso, args.token, args.lifetime)


if __name__ == "__main__":
    _main(sys.argv[1:])
