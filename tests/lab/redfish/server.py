"""Redfish BMC emulator: many iDRAC8 / iDRAC9 / generic BMCs in one HTTPS process.

Why: the Redfish modules (issue 4) must be tested against BMCs that behave like the Dell R730's
iDRAC8 and newer iDRACs do, failures included, without hardware. Each BMC is served under a path
prefix on the lab port (``https://127.0.0.1:PORT/bmc/<name>/redfish/v1/...``; every ``@odata.id``
carries the prefix) and, optionally, at the root of a port of its own. TLS uses a CA generated at
start (``ca.pem`` in the state dir), so clients verify certificates as they would in production.

sushy and prefixes: ``sushy.Sushy(base_url)`` joins the absolute ``root_prefix`` (default
``/redfish/v1/``) onto the base URL, which drops a path in the base URL. For a prefixed BMC pass
``root_prefix=<prefix>/redfish/v1/`` (``RedfishLab.sushy_args(name)`` returns both); everything
after the service root follows the ``@odata.id`` links and works unchanged. Dell's
``reset_idrac(wait=True)`` probes the hard-coded ``/redfish/v1/``: use a BMC with its own port
(``BmcSpec(port=0)``) for that call.

In-process::

    with RedfishLab(bmcs=[BmcSpec(name="r730-1", personality="idrac8")], delay_scale=0.0) as lab:
        lab.url("r730-1")            # https://127.0.0.1:PORT/bmc/r730-1  (the module's bmc_url)
        lab.ca_path                  # CA bundle for verify=
        lab.bmc("r730-1").inject("insert_sys446", count=1)

Command line (the ``lab.common.emulator`` contract)::

    python -m lab.redfish.server --port 8443 --state-dir DIR [--delay-scale F]
        [--bmcs r730-1:idrac8,r740-1:idrac9,gen-1:generic[:PORT]]

Out-of-process control (no auth, loopback only): ``GET /lab/bmcs``, ``GET /lab/bmc/<name>/state``,
``GET /lab/bmc/<name>/requests``, ``POST /lab/bmc/<name>/faults`` (``{"fault": ..., "count": N,
...options}``), ``DELETE /lab/bmc/<name>/faults``, ``POST /lab/bmc/<name>/reboot``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import shutil
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

from lab.common.emulator import LOOPBACK, emulator_arguments, serve_until_signalled
from lab.common.tls import issue_server_certificate
from lab.redfish.bmc import BmcError, BmcSpec, BmcState, Reply
from lab.redfish.personality import DEFAULT_BMCS, LAB_PASSWORD, LAB_USERNAME
from lab.redfish.tree import R, Tree

__all__ = ["BmcSpec", "BmcState", "RedfishLab"]

# Paths a client may GET without credentials (DSP0266: the service root, OData docs).
UNAUTHENTICATED = frozenset({R, f"{R}/odata", f"{R}/$metadata", "/redfish"})
# Downtime shorter than this is emulated by dropping connections, not by closing the listener.
MIN_LISTENER_DOWNTIME = 0.5


# ------------------------------------------------------------------------------------- TLS
def make_tls_files(directory: Path, hosts: list[str]) -> tuple[Path, Path, Path]:
    """Write ``ca.pem`` (a new CA), ``server.pem`` and ``server.key`` (signed by it) into ``directory``."""
    tls = issue_server_certificate("metalplane lab Redfish CA", [*(hosts or []), "localhost"])
    directory.mkdir(parents=True, exist_ok=True)
    ca_path, cert_path, key_path = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    cert_path.write_bytes(tls.cert_pem)
    key_path.write_bytes(tls.key_pem)
    key_path.chmod(0o600)
    # ca.pem last: it is the "ready" file labctl waits for.
    tmp = directory / "ca.pem.tmp"
    tmp.write_bytes(tls.ca_pem)
    tmp.replace(ca_path)
    return ca_path, cert_path, key_path


def _only_member(tree: Tree, state: BmcState, doc: dict[str, Any], query: str) -> dict[str, Any]:
    """DSP0266 ``?only``: a collection with exactly one member answers with that member."""
    if not state.p.only_member_query or "only" not in query.split("&"):
        return doc
    members = doc.get("Members")
    if not isinstance(members, list) or len(members) != 1:
        return doc  # zero or several members: the collection, as usual
    with state.lock:
        member = tree.get(str(members[0]["@odata.id"]), "")
    return member if member is not None else doc


# ------------------------------------------------------------------------------------ HTTP
class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    lab: RedfishLab
    fixed_bmc: str | None  # a BMC's own port: it is served at the root
    ssl_context: ssl.SSLContext

    def finish_request(self, request: Any, client_address: Any) -> None:
        # TLS handshake in the worker thread, so one slow client cannot stall accept().
        try:
            request.settimeout(30)
            tls = self.ssl_context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            with contextlib.suppress(OSError):
                tls.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # client disconnects and TLS errors are normal in fault tests


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: without it the body of each answer waits for the client's delayed ACK of the headers (40 ms on
    # Linux), an artefact of this server's two writes (tests/lab/kube/server.py); the BMC's own timing is the
    # personality's delays.
    disable_nagle_algorithm = True
    server: _Server
    server_version = "Appweb/4.5"  # what iDRACs announce
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # ------------------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, reply: Reply, prefix: str = "", method: str = "GET") -> None:
        payload = b""
        if reply.body is not None:
            text = json.dumps(reply.body, indent=1)
            if prefix:
                text = text.replace(f'"{R}', f'"{prefix}{R}')
            payload = text.encode()
        elif reply.text is not None:
            payload = reply.text.encode()
        self.send_response(reply.status)
        if payload:
            self.send_header("Content-Type", reply.content_type)
        self.send_header("OData-Version", "4.0")
        self.send_header("Cache-Control", "no-cache")
        for name, value in reply.headers.items():
            self.send_header(name, prefix + value if name == "Location" and value.startswith(R) else value)
        self.send_header("Content-Length", str(len(payload)))
        if self.headers.get("Connection", "").lower() == "close":
            self.close_connection = True
        self.end_headers()
        if method != "HEAD" and payload:
            self.wfile.write(payload)

    def _handle(self, method: str) -> None:
        started = time.monotonic()
        split = urlsplit(self.path)
        path, query = unquote(split.path), split.query
        if path.startswith("/lab/") or path == "/lab":
            self._send(self.server.lab.control(method, path, self._read_body(), self.client_address[0]))
            return
        lab = self.server.lab
        if self.server.fixed_bmc is not None:
            name, prefix, rest = self.server.fixed_bmc, "", path
        else:
            parts = path.split("/", 3)  # "", "bmc", name, rest
            if len(parts) < 4 or parts[1] != "bmc" or parts[2] not in lab.states:
                self._read_body()
                self._send(Reply(404, {"error": {"code": "Base.1.0.GeneralError", "message": f"no BMC at {path}"}}))
                return
            name, prefix, rest = parts[2], f"/bmc/{parts[2]}", "/" + parts[3]
        state = lab.states[name]
        canonical = rest.rstrip("/") or "/"
        raw = self._read_body()
        status = 0
        try:
            reply, after = self._dispatch(state, method=method, path=canonical, query=query, raw=raw, prefix=prefix)
        except BmcError as exc:
            reply, after = exc.reply, None
        except _Abort:
            self.close_connection = True
            state.record(method, canonical, 0, started)
            return
        status = reply.status
        self._send(reply, prefix, method)
        self.wfile.flush()
        state.record(method, canonical + (f"?{query}" if query else ""), status, started)
        if after is not None:
            after()

    def _dispatch(  # noqa: PLR0911
        self, state: BmcState, *, method: str, path: str, query: str, raw: bytes, prefix: str
    ) -> tuple[Reply, Any]:
        phase = state.phase()
        if phase == "down":
            raise _Abort
        if phase == "busy":
            raise state.busy_error()
        latency = state.fire("latency")
        if latency is not None:
            time.sleep(float(latency.options.get("seconds", 1.0)))
        if state.fire("busy_503") is not None:
            err = state.error("ServiceTemporarilyUnavailable")
            err.reply.headers["Retry-After"] = "1"
            raise err
        armed = state.peek("error")
        if armed is not None and self._matches(armed.options, method, path):
            state.fire("error")
            raise state.error(
                str(armed.options.get("message_id", "InternalError")),
                status=int(armed.options["status"]) if "status" in armed.options else None,
            )
        if path == "/redfish" and method in ("GET", "HEAD"):
            return Reply(200, {"v1": f"{R}/"}), None
        tree = Tree(state)
        public = path in UNAUTHENTICATED and method in ("GET", "HEAD")
        login = method == "POST" and path == f"{R}/SessionService/Sessions"
        if not public and not login:
            self._authenticate(state, phase, method)
        body: dict[str, Any] = {}
        if raw.strip():
            try:
                text = raw.decode()
                if prefix:
                    text = text.replace(f'"{prefix}{R}', f'"{R}')
                body = json.loads(text)
            except (UnicodeDecodeError, json.JSONDecodeError):
                raise state.error("MalformedJSON") from None
            if not isinstance(body, dict):
                raise state.error("MalformedJSON")
        if method in ("GET", "HEAD"):
            if path == f"{R}/$metadata":
                return Reply(200, text=metadata_document(), content_type="application/xml"), None
            with state.lock:
                doc = tree.get(path, query)
            if doc is None:
                raise state.error("ResourceNotFound")
            doc = _only_member(tree, state, doc, query)
            headers = {"ETag": _etag(doc)} if state.p.etags else {}
            if path.startswith(f"{R}/TaskService/Tasks/") and doc.get("TaskState") == "Running":
                return Reply(202, doc, {**headers, "Location": path}), None  # a task monitor still working
            return Reply(200, doc, headers), None
        if method == "PATCH":
            with state.lock:
                if "BootOrder" in (body.get("Boot") or {}) and state.fire("concurrent_order_change") is not None:
                    order = state.boot_options_order  # another writer between the client's read and this PATCH
                    state.boot_options_order = order[1:] + order[:1]
                if state.p.etags and self.headers.get("If-Match"):
                    current = tree.get(path, "")
                    if current is not None and not _etag_matches(self.headers["If-Match"], _etag(current)):
                        state.counters["etag_mismatch"] += 1
                        raise state.error("PreconditionFailed")
                reply = tree.patch(path, body)
                if reply.body is not None and state.p.etags:
                    reply.headers["ETag"] = _etag(reply.body)
                return reply, None
        if method == "POST":
            sid = tree.insert_target(path)
            if sid is not None:
                with state.lock:
                    image = tree.check_insert(sid, body)
                fetch_error = state.fetch_image(image)  # outside the lock, like a BMC's mount daemon
                with state.lock:
                    return tree.finish_insert(sid, body, image, fetch_error), None
            with state.lock:
                reply = tree.post(path, body)
            if reply.headers.pop("X-Lab-Manager-Reset", None):
                return reply, state.manager_reset
            return reply, None
        if method == "DELETE":
            with state.lock:
                return tree.delete(path), None
        raise state.error("OperationNotAllowed", status=405)

    @staticmethod
    def _matches(options: dict[str, Any], method: str, path: str) -> bool:
        wanted_method = options.get("method")
        return (wanted_method is None or str(wanted_method).upper() == method) and str(options.get("path", "")) in path

    def _authenticate(self, state: BmcState, phase: str, method: str) -> None:
        token = self.headers.get("X-Auth-Token")
        auth = self.headers.get("Authorization", "")
        ok = False
        if token:
            ok = state.token_valid(token)
        elif auth.startswith("Basic "):
            try:
                user, _unused, password = base64.b64decode(auth[6:]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                user, password = "", ""
            ok = state.check_credentials(user, password)
            refusal = state.basic_write_refusal(method) if ok and phase != "unauth" else None
            if refusal is not None:
                raise refusal
        if phase == "unauth":
            ok = False
        if not ok:
            err = state.error("NoValidSession", status=401)
            err.reply.headers["WWW-Authenticate"] = 'Basic realm="RedfishService"'
            raise err


class _Abort(Exception):
    """Drop the connection without an answer (BMC rebooting)."""


def _etag(doc: dict[str, Any]) -> str:
    return '"' + hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20] + '"'


def _etag_matches(if_match: str, etag: str) -> bool:
    wanted = [t.strip().removeprefix("W/") for t in if_match.split(",")]
    return "*" in wanted or etag in wanted


METADATA = """<?xml version="1.0" encoding="UTF-8"?>
<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">
{refs}
  <edmx:DataServices>
    <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service">
      <EntityContainer Name="Service" Extends="ServiceRoot.v1_5_0.ServiceContainer"/>
    </Schema>
  </edmx:DataServices>
</edmx:Edmx>
"""
METADATA_SCHEMAS = (
    "ServiceRoot",
    "ComputerSystem",
    "ComputerSystemCollection",
    "Manager",
    "ManagerCollection",
    "Chassis",
    "ChassisCollection",
    "Session",
    "SessionCollection",
    "SessionService",
    "VirtualMedia",
    "VirtualMediaCollection",
    "EthernetInterface",
    "EthernetInterfaceCollection",
    "PCIeDevice",
    "PCIeDeviceCollection",
    "Bios",
    "SecureBoot",
    "BootOption",
    "BootOptionCollection",
    "TaskService",
    "Task",
    "TaskCollection",
    "Message",
    "Resource",
    "Settings",
)


def metadata_document() -> str:
    refs = "\n".join(
        f'  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/{name}_v1.xml">\n'
        f'    <edmx:Include Namespace="{name}"/>\n  </edmx:Reference>'
        for name in METADATA_SCHEMAS
    )
    return METADATA.format(refs=refs)


# ------------------------------------------------------------------------------------- lab
class RedfishLab:
    """Many emulated BMCs behind one HTTPS port (path prefixes), optionally one port each."""

    def __init__(
        self,
        bmcs: list[BmcSpec] | None = None,
        *,
        host: str = LOOPBACK,
        port: int = 0,
        delay_scale: float = 1.0,
        state_dir: Path | str | None = None,
    ) -> None:
        specs = bmcs if bmcs is not None else [BmcSpec(name=n, personality=p) for n, p in DEFAULT_BMCS.items()]
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            msg = f"BMC names must be unique: {names}"
            raise ValueError(msg)
        self.host = host
        self._requested_port = port
        self.delay_scale = delay_scale
        self.states: dict[str, BmcState] = {s.name: BmcState(s, delay_scale) for s in specs}
        for state in self.states.values():
            state.on_reset = self._on_reset
        self._state_dir = Path(state_dir) if state_dir is not None else None
        self._tmp: Path | None = None
        self._servers: dict[str | None, _Server] = {}
        self._threads: list[threading.Thread] = []
        self._ports: dict[str, int] = {}
        self._ssl: ssl.SSLContext | None = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self.port = 0
        self.ca_path = ""
        # More of the control API (``/lab/...``), e.g. lab.metal's ``/lab/hosts``: (status, body) or None.
        self.extra_control: Callable[[str, str, bytes], tuple[int, dict[str, Any]] | None] | None = None

    # ------------------------------------------------------------------------ lifecycle
    def start(self) -> RedfishLab:
        directory = self._state_dir
        if directory is None:
            self._tmp = Path(tempfile.mkdtemp(prefix="redfish-lab-"))
            directory = self._tmp
        ca_path, cert_path, key_path = make_tls_files(directory, [self.host])
        self.ca_path = str(ca_path)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(cert_path), str(key_path))
        self._ssl = context
        self._servers[None] = self._serve(self._requested_port, None)
        self.port = self._servers[None].server_address[1]
        for name, state in self.states.items():
            if state.spec.port is not None:
                server = self._serve(state.spec.port, name)
                self._servers[name] = server
                self._ports[name] = server.server_address[1]
        return self

    def _serve(self, port: int, fixed_bmc: str | None) -> _Server:
        server = _Server((self.host, port), _Handler, bind_and_activate=True)
        server.lab = self
        server.fixed_bmc = fixed_bmc
        assert self._ssl is not None
        server.ssl_context = self._ssl
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"redfish-{fixed_bmc or 'lab'}",
            daemon=True,
        )
        thread.start()
        self._threads.append(thread)
        return server

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            servers = list(self._servers.values())
            self._servers.clear()
        for server in servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> RedfishLab:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --------------------------------------------------------------------------- access
    def url(self, name: str) -> str:
        """The ``bmc_url`` of a BMC under the lab port: ``https://HOST:PORT/bmc/<name>``."""
        self._check(name)
        return f"https://{self.host}:{self.port}/bmc/{name}"

    def port_url(self, name: str) -> str:
        """The ``bmc_url`` of a BMC that has its own port (``BmcSpec(port=...)``): ``https://HOST:PORT``."""
        self._check(name)
        if name not in self._ports:
            msg = f"BMC {name!r} has no port of its own; give BmcSpec(port=0)"
            raise KeyError(msg)
        return f"https://{self.host}:{self._ports[name]}"

    def sushy_args(self, name: str, own_port: bool = False) -> dict[str, str]:
        """``base_url`` and ``root_prefix`` for ``sushy.Sushy(**lab.sushy_args(name), ...)``."""
        if own_port:
            return {"base_url": self.port_url(name), "root_prefix": f"{R}/"}
        return {"base_url": f"https://{self.host}:{self.port}", "root_prefix": f"/bmc/{name}{R}/"}

    def bmc(self, name: str) -> BmcState:
        self._check(name)
        return self.states[name]

    def _check(self, name: str) -> None:
        if name not in self.states:
            msg = f"no BMC named {name!r}; the lab has {sorted(self.states)}"
            raise KeyError(msg)

    # ------------------------------------------------------------------------ downtime
    def _on_reset(self, state: BmcState) -> None:
        """A BMC with its own port really refuses connections during the down phase."""
        down = state.down_until() - state.clock()
        if state.name not in self._ports or down < MIN_LISTENER_DOWNTIME:
            return
        threading.Thread(target=self._bounce, args=(state.name, down), daemon=True).start()

    def _bounce(self, name: str, down: float) -> None:
        with self._lock:  # runs after the reset's 204 was flushed (see _Handler._handle)
            server = self._servers.pop(name, None)
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._stopped.wait(max(0.0, down)):
            return
        with self._lock:
            if self._stopped.is_set():
                return
            for _attempt in range(50):
                try:
                    self._servers[name] = self._serve(self._ports[name], name)
                    break
                except OSError:
                    time.sleep(0.1)

    # ------------------------------------------------------------------- /lab control
    def control(self, method: str, path: str, raw: bytes, client: str) -> Reply:  # noqa: PLR0911
        if not (client.startswith("127.") or client == "::1"):
            return Reply(403, {"error": "the lab control API is loopback only"})
        if self.extra_control is not None:
            handled = self.extra_control(method, path, raw)
            if handled is not None:
                return Reply(*handled)
        parts = path.strip("/").split("/")
        if parts == ["lab", "bmcs"] and method == "GET":
            return Reply(200, self.describe())
        if len(parts) != 4 or parts[1] != "bmc" or parts[2] not in self.states:
            return Reply(404, {"error": f"unknown lab path {path}"})
        state, what = self.states[parts[2]], parts[3]
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            return Reply(400, {"error": "body is not JSON"})
        if what == "state" and method == "GET":
            return Reply(200, state.snapshot())
        if what == "requests" and method == "GET":
            return Reply(200, {"requests": [vars(r) for r in state.requests]})
        if what == "faults" and method == "POST":
            items = body if isinstance(body, list) else [body]
            try:
                for item in items:
                    options = dict(item)
                    fault = options.pop("fault")
                    count = int(options.pop("count", 1))
                    state.inject(fault, count=count, **options)
            except (KeyError, TypeError, ValueError) as exc:
                return Reply(400, {"error": f"bad fault: {exc}"})
            return Reply(200, state.snapshot()["faults"])
        if what == "faults" and method == "DELETE":
            state.clear_faults()
            return Reply(204)
        if what == "reboot" and method == "POST":
            state.reboot()
            return Reply(200, state.boot)
        return Reply(405, {"error": f"{method} {path} is not supported"})

    def describe(self) -> dict[str, Any]:
        """What an inventory needs: the CA, the credential the BMCs share and each BMC's URL. BMCs with passwords of
        their own (a test of per-BMC credentials) have no shared one: ``password`` is left out, so an inventory that
        reads it fails loudly instead of sending the wrong one."""
        passwords = {state.spec.password for state in self.states.values()}
        shared = {"password": passwords.pop() if passwords else LAB_PASSWORD} if len(passwords) <= 1 else {}
        return {
            "ca_path": self.ca_path,
            "username": LAB_USERNAME,
            **shared,
            "bmcs": {
                name: {
                    "bmc_url": self.url(name),
                    "personality": state.p.name,
                    **({"port_url": self.port_url(name)} if name in self._ports else {}),
                }
                for name, state in self.states.items()
            },
        }


def parse_bmcs(text: str) -> list[BmcSpec]:
    """``name:personality[:port],...`` -> specs (port 0 = a free port of its own)."""
    specs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        fields = item.split(":")
        if len(fields) not in (2, 3):
            msg = f"--bmcs entries are name:personality[:port], not {item!r}"
            raise ValueError(msg)
        port = int(fields[2]) if len(fields) == 3 else None
        specs.append(BmcSpec(name=fields[0], personality=fields[1], port=port))
    return specs


def main(argv: list[str] | None = None) -> int:
    parser = emulator_arguments("Redfish BMC emulator (iDRAC8 / iDRAC9 / generic personalities)")
    parser.add_argument(
        "--bmcs",
        default=",".join(f"{n}:{p}" for n, p in DEFAULT_BMCS.items()),
        help="comma-separated name:personality[:port] (default %(default)s)",
    )
    parser.add_argument(
        "--metal-hosts", action="store_true", help="a simulated server behind every BMC, reachable over SSH (lab.metal)"
    )
    args = parser.parse_args(argv)
    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="redfish-lab-"))
    lab = RedfishLab(
        parse_bmcs(args.bmcs), host=args.host, port=args.port, delay_scale=args.delay_scale, state_dir=state_dir
    )
    lab.start()
    fleet = None
    if args.metal_hosts:
        from lab.metal.fleet import MetalFleet
        from lab.metal.sandbox import SandboxUnavailable

        try:
            fleet = MetalFleet(lab.states, state_dir, args.delay_scale).start()
        except SandboxUnavailable as exc:
            lab.stop()
            print(f"redfish: --metal-hosts: {exc}", file=sys.stderr)
            return 2
        lab.extra_control = fleet.control
    (state_dir / "redfish-bmcs.json").write_text(json.dumps(lab.describe(), indent=2))

    def _shutdown() -> None:
        if fleet is not None:
            fleet.stop()
        lab.stop()

    serve_until_signalled(_shutdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
