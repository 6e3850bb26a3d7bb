"""The SSH server of each simulated host: asyncssh on the host's loopback address, sessions in its sandbox.

Why asyncssh (PyPI) and not OpenSSH's sshd: sshd is a system package that needs root to install
and, to run sessions as other users, root to run; asyncssh is a pure-Python SSH server that serves
exactly what Ansible's ordinary ``ssh`` connection uses from the OpenSSH client (``/usr/bin/ssh``):

- public-key authentication against the *host's* ``~/.ssh/authorized_keys`` (read from the
  running host at each login, so a key a playbook adds works at once, and a host installed without
  one lets nobody in);
- exec channels (and a login shell), each run inside the host's sandbox through ``nsenter`` as
  ``$SHELL -c <command>`` from the user's home, with the environment sshd would give;
- the SFTP subsystem (Ansible's default ``ssh_transfer_method: smart`` tries SFTP first; OpenSSH
  9's ``scp`` speaks SFTP too), served on the host's root as ``/proc/<its PID 1>/root``;
- the host keys the installed OS has on its disk, so ``known_hosts`` pins what the ISO carried.

Not served: password and keyboard-interactive authentication, port forwarding, agent and X11
forwarding. A requested PTY is granted but the session runs on pipes (stdout and stderr separate);
Ansible does not need a terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, Protocol

import asyncssh

# The environment an OpenSSH sshd gives a session (sshd(8), "LOGIN PROCESS"), plus the client's
# SendEnv variables that Debian's and RHEL's sshd_config AcceptEnv (LANG, LC_*).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ACCEPTED_ENV_PREFIXES = ("LANG", "LC_")
CHUNK = 65536
# Seconds a host's thread waits for the SSH loop to bind or drop a listener. Only a failure waits this long; a
# loaded CI runner (three test lanes on two cores) has been seen to keep the loop from answering for over 10 s.
LOOP_CALL_TIMEOUT = 60.0
# Run the user's shell from the home directory, as sshd does: `$SHELL -c "$command"`.
SESSION_WRAPPER = 'cd "$HOME" 2>/dev/null || cd /; exec "$0" -c "$1"'
LOGIN_WRAPPER = 'cd "$HOME" 2>/dev/null || cd /; exec "$0" -l'


class HostRuntime(Protocol):
    """What the SSH server needs from a running simulated host."""

    name: str

    def authorized_keys(self, username: str) -> str | None: ...

    def account(self, username: str) -> tuple[str, str] | None:
        """``(home, shell)`` of a user of the installed OS, or None if there is no such user."""

    def session_command(self, argv: list[str]) -> list[str]: ...

    def root_path(self) -> str: ...


class _Server(asyncssh.SSHServer):
    def __init__(self, runtime: HostRuntime, connections: set[asyncssh.SSHServerConnection]) -> None:
        self.runtime = runtime
        self.connections = connections
        self.conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        self.connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.conn is not None:
            self.connections.discard(self.conn)

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        if self.runtime.account(username) is None:
            return False
        text = self.runtime.authorized_keys(username)
        if not text:
            return False
        try:
            keys = asyncssh.import_authorized_keys(text)
        except (ValueError, asyncssh.KeyImportError):
            return False
        return keys.validate(key, "", "") is not None


class _SandboxSFTP(asyncssh.SFTPServer):
    """SFTP on the host's root: client paths map below ``/proc/<PID 1>/root``, relative to the home."""

    def __init__(self, chan: asyncssh.SSHServerChannel, runtime: HostRuntime) -> None:
        super().__init__(chan)
        self._root = runtime.root_path().encode()
        account = runtime.account(chan.get_extra_info("username"))
        self._home = (account[0] if account else "/").encode()

    def _inside(self, path: bytes) -> bytes:
        return posixpath.normpath(posixpath.join(self._home, path)) if path else self._home

    def map_path(self, path: bytes) -> bytes:
        return self._root + self._inside(path)

    def reverse_map_path(self, path: bytes) -> bytes:
        if path == self._root:
            return b"/"
        if path.startswith(self._root + b"/"):
            return path[len(self._root) :]
        raise asyncssh.SFTPNoSuchFile("File not found")

    def realpath(self, path: bytes) -> bytes:
        return self._inside(path)


class SshService:
    """One asyncio loop (in a thread) serving every host's SSH listener."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="metal-sshd", daemon=True)
        self._thread.start()
        self._servers: dict[str, asyncssh.SSHAcceptor] = {}
        self._connections: dict[str, set[asyncssh.SSHServerConnection]] = {}

    def _call(self, coro: Coroutine[Any, Any, Any], timeout: float = LOOP_CALL_TIMEOUT) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout)

    def start_host(self, runtime: HostRuntime, address: str, port: int, host_keys: list[bytes]) -> None:
        """Listen for ``runtime`` on ``address:port`` with its installed host keys."""
        self._call(self._start(runtime, address, port, host_keys))

    async def _start(self, runtime: HostRuntime, address: str, port: int, host_keys: list[bytes]) -> None:
        await self._stop(runtime.name)
        connections: set[asyncssh.SSHServerConnection] = set()
        self._connections[runtime.name] = connections
        keys = [asyncssh.import_private_key(k) for k in host_keys]

        def sftp_factory(chan: asyncssh.SSHServerChannel) -> asyncssh.SFTPServer:
            return _SandboxSFTP(chan, runtime)

        self._servers[runtime.name] = await asyncssh.listen(
            address,
            port,
            server_host_keys=keys,
            server_factory=lambda: _Server(runtime, connections),
            process_factory=lambda process: _session(runtime, process),
            sftp_factory=sftp_factory,
            encoding=None,
            line_editor=False,
            allow_scp=False,
            agent_forwarding=False,
            x11_forwarding=False,
            allow_pty=True,
            reuse_address=True,
        )

    def stop_host(self, name: str) -> None:
        """Stop listening and drop every connection at once, as a host losing power does."""
        if name not in self._servers and not self._connections.get(name):
            return  # nothing listens: a power event of a host whose OS never came up needs no trip to the loop
        if self._loop.is_running():
            self._call(self._stop(name))

    async def _stop(self, name: str) -> None:
        server = self._servers.pop(name, None)
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2.0)
        for conn in list(self._connections.pop(name, set())):
            conn.abort()

    def close(self) -> None:
        for name in list(self._servers):
            self.stop_host(name)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


def _environment(runtime: HostRuntime, process: asyncssh.SSHServerProcess[bytes], home: str, shell: str) -> list[str]:
    username = process.get_extra_info("username")
    peer = process.get_extra_info("peername") or ("", 0)
    sock = process.get_extra_info("sockname") or ("", 0)
    env = {
        "HOME": home,
        "USER": username,
        "LOGNAME": username,
        "SHELL": shell,
        "PATH": DEFAULT_PATH,
        "SSH_CLIENT": f"{peer[0]} {peer[1]} {sock[1]}",
        "SSH_CONNECTION": f"{peer[0]} {peer[1]} {sock[0]} {sock[1]}",
    }
    for key, value in (process.env or {}).items():
        name = key.decode() if isinstance(key, bytes) else str(key)
        if name.startswith(ACCEPTED_ENV_PREFIXES):
            env[name] = value.decode() if isinstance(value, bytes) else str(value)
    if process.get_terminal_type():
        env["TERM"] = process.get_terminal_type() or "dumb"
    return [f"{k}={v}" for k, v in env.items()]


async def _session(runtime: HostRuntime, process: asyncssh.SSHServerProcess[bytes]) -> None:
    account = runtime.account(process.get_extra_info("username"))
    if account is None:
        process.exit(1)
        return
    home, shell = account
    command = process.command
    inner = ["/usr/bin/env", "-i", *_environment(runtime, process, home, shell), "/bin/sh", "-c"]
    inner += [SESSION_WRAPPER, shell, command] if command is not None else [LOGIN_WRAPPER, shell]
    try:
        proc = await asyncio.create_subprocess_exec(
            *runtime.session_command(inner),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except Exception as exc:
        process.stderr.write(f"{runtime.name}: {exc}\n".encode())
        process.exit(255)
        return
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    feeder = asyncio.ensure_future(_feed(process, proc.stdin))
    await asyncio.gather(_drain(proc.stdout, process.stdout.write), _drain(proc.stderr, process.stderr.write))
    status = await proc.wait()
    feeder.cancel()
    with contextlib.suppress(Exception):
        process.exit(status if status >= 0 else 128 - status)


async def _feed(process: asyncssh.SSHServerProcess[bytes], stdin: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await process.stdin.read(CHUNK)
            if not data:
                break
            stdin.write(data)
            await stdin.drain()
    except (BrokenPipeError, ConnectionResetError, asyncssh.Error):
        pass
    finally:
        with contextlib.suppress(Exception):
            stdin.close()


async def _drain(stream: asyncio.StreamReader, write: Callable[[bytes], None]) -> None:
    while True:
        data = await stream.read(CHUNK)
        if not data:
            return
        with contextlib.suppress(Exception):
            write(data)
