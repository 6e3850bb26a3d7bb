"""The real lane's front door: a TCP pass-through to kube-apiserver that a test can cut or shut.

Why: the fault tests need "every watch dropped mid-stream" and "API unreachable" on a *real*
server. Restarting kube-apiserver ends every watch too, but takes 10-40 s on a busy machine; a
pass-through in front of it cuts all client connections at once and leaves the server running,
which is what a load balancer reset looks like to a client. TLS is not terminated here: clients
still verify the apiserver's own certificate (its SANs include 127.0.0.1) and present the token
to the real server, so nothing about authentication changes.

Only the tests' kubeconfig goes through the door; the controllers, the scheduler and the fake
kubelet talk to the apiserver directly, so a cut never disturbs the control plane itself.

- ``drop()``: shuts down every open connection (both directions); the listener stays open.
- ``close()``: stops listening (new connections are refused) and drops every open connection.
- ``open()``: listens again on the same port.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading

LOG = logging.getLogger("front-door")
# How long to wait for the apiserver's port when a client connects; a refused or slow upstream
# resets the client instead (what a load balancer with no healthy backend does).
UPSTREAM_CONNECT_TIMEOUT = 5.0
CHUNK = 64 * 1024


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0): the peer sees 'connection reset', not a clean end of stream."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class _Pair:
    """One client connection and its upstream connection, pumped by two threads."""

    def __init__(self, door: FrontDoor, client: socket.socket, upstream: socket.socket) -> None:
        self.door, self.client, self.upstream = door, client, upstream
        self._open_directions = 2
        self._lock = threading.Lock()

    def start(self) -> None:
        for source, sink in ((self.client, self.upstream), (self.upstream, self.client)):
            threading.Thread(target=self._pump, args=(source, sink), daemon=True, name="front-door-pump").start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(CHUNK)
                if not data:
                    break
                sink.sendall(data)
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)  # pass the clean end of stream on
        except OSError:
            self.cut()
        finally:
            with self._lock:
                self._open_directions -= 1
                done = self._open_directions == 0
            if done:
                self._finish()

    def cut(self) -> None:
        """End both connections now; the pump threads wake up and finish."""
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _finish(self) -> None:
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.close()
        self.door._forget(self)


class FrontDoor:
    """Listens on ``host:port`` and forwards each connection to ``upstream`` (host, port)."""

    def __init__(self, host: str, port: int, upstream: tuple[str, int]) -> None:
        self.host, self.port, self.upstream = host, port, upstream
        self._pairs: set[_Pair] = set()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.accepted = 0
        self.dropped = 0

    @property
    def is_open(self) -> bool:
        return self._listener is not None

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._pairs)

    def open(self) -> None:
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.host, self.port))
            listener.listen(128)
            self._listener = listener
        self._thread = threading.Thread(target=self._accept, args=(listener,), daemon=True, name="front-door")
        self._thread.start()
        LOG.info("front door open on %s:%d -> %s:%d", self.host, self.port, *self.upstream)

    def close(self) -> int:
        """Refuse new connections and drop the open ones; returns how many were dropped."""
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() below
            listener.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        dropped = self.drop()
        LOG.info("front door closed (%d connection(s) dropped)", dropped)
        return dropped

    def drop(self) -> int:
        """Cut every open connection (watches included); returns how many there were."""
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            pair.cut()
        self.dropped += len(pairs)
        if pairs:
            LOG.info("dropped %d connection(s)", len(pairs))
        return len(pairs)

    def _forget(self, pair: _Pair) -> None:
        with self._lock:
            self._pairs.discard(pair)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _address = listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self.upstream, timeout=UPSTREAM_CONNECT_TIMEOUT)
                upstream.settimeout(None)
            except OSError as exc:
                LOG.warning("upstream %s:%d unreachable (%s): resetting the client", *self.upstream, exc)
                _reset(client)
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(self, client, upstream)
            with self._lock:
                if self._listener is not listener:  # closed meanwhile
                    _reset(client)
                    _reset(upstream)
                    return
                self._pairs.add(pair)
                self.accepted += 1
            pair.start()
