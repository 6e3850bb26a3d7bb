"""Supervisor of the real kube-apiserver lane: etcd + kube-apiserver + controller-manager + scheduler + fake kubelet.

Why: the emulator is only as honest as the real server it copies. This starts a real Kubernetes
v1.20.2 control plane (built by ``scripts/k8s-real/build.sh``) on free 127.0.0.1 ports, writes a
kubeconfig, waits until it is usable, and stops *everything it started* (each process runs in its
own process group, which is killed as a whole and checked empty).

    python scripts/k8s-real/lane.py start  [--state-dir D] [--nodes N --gpus G] [--no-controllers]
    python scripts/k8s-real/lane.py status [--state-dir D]
    python scripts/k8s-real/lane.py stop   [--state-dir D]
    python scripts/k8s-real/lane.py run    [--state-dir D] [...] -- CMD ARGS...   # start, run CMD, always stop
    python scripts/k8s-real/lane.py control --state-dir D   # the lane-control process (started by start)

``run`` gives CMD the environment ``MP_KUBE_TARGET=real``, ``MP_REAL_KUBECONFIG=<state>/kubeconfig``
and ``MP_REAL_LANE_CONTROL=http://127.0.0.1:<port>`` and exits with CMD's status. Traps this handles
(see docs/testing/k8s-real.md): 1.20's ``--insecure-port`` is a no-op, so the apiserver serves TLS
(a CA made here, verified by clients) and authenticates a static token;
``--disable-admission-plugins=ServiceAccount`` because the token controller is off (no pod needs a
service-account token here).

Fault injection on a real server (the ``lane-control`` process, a loopback HTTP API that takes the
kubeconfig's bearer token): the tests' kubeconfig reaches the apiserver through a TCP front door
(``k8s_real.frontdoor``) that can drop every connection; ``POST /apiserver/outage`` stops
kube-apiserver for N seconds and starts it again with the same flags, certificates and etcd data;
the apiserver's audit log (the tests' user, list and watch only) answers "which requests did the
module send" (``GET /requests``); ``/kubelet/...`` is forwarded to the fake kubelet's control API
(nodes added at runtime, pods held not ready). The controllers, scheduler and fake kubelet use a
second token and talk to the apiserver directly.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
TESTS_DIR = REPO_ROOT / "tests"
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

import argparse
import base64
import contextlib
import datetime
import ipaddress
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http.server import ThreadingHTTPServer
from types import FrameType
from typing import Any

import yaml
from k8s_real.frontdoor import FrontDoor
from k8s_real.jsonhttp import TokenJsonHandler
from k8s_real.kubehttp import KubeHttp, KubeHttpError, Target

from lab.common.emulator import LOOPBACK, free_port
from support.collection import install_collection_finder

install_collection_finder()

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import WaitTimeout
from ansible_collections.metalplane.inference.plugins.module_utils._common.waiting import Backoff, Poll, wait_for

VERSION = os.environ.get("K8S_REAL_VERSION", "v1.20.2")
CACHE_ROOT = Path(
    os.environ.get("K8S_REAL_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "metalplane" / "k8s-real"
)
DEFAULT_BIN = CACHE_ROOT / VERSION / "bin"
DEFAULT_STATE = CACHE_ROOT / "run"
FAKE_KUBELET = TESTS_DIR / "k8s_real" / "fake_kubelet.py"

# Probes poll quickly at first (a ready component is noticed within ~0.2 s) and settle at 1 s.
PROBE_BACKOFF = Backoff(initial=0.2, cap=1.0, factor=1.5, jitter=0.1)
# On a shared 2-core machine the apiserver needs 10-40 s to become ready; 240 s leaves room.
DEFAULT_START_TIMEOUT = 240.0
# SIGTERM first; whatever still lives after this many seconds gets SIGKILL.
STOP_GRACE = 15.0
SERVICE_CIDR = "10.96.0.0/16"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
# The tests' user (kubeconfig) and the control plane's own user (kubeconfig-components); only the
# tests' list and watch requests reach the audit log, so it reads as "what the module sent".
TEST_USER = "admin"
COMPONENTS_USER = "lane-components"
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "users": [TEST_USER], "verbs": ["list", "watch"]}, {"level": "None"}],
}
# An outage request is refused above this (the apiserver must come back within a test's budget).
MAX_OUTAGE_SECONDS = 120.0
# An outage stops kube-apiserver with SIGTERM and SIGKILLs it after this: 1.20 would otherwise wait
# up to 60 s for the controllers' open watches to drain. Its state is in etcd, which keeps running.
OUTAGE_STOP_GRACE = 3.0
CONTROL_HTTP_TIMEOUT = 10.0


class LaneError(Exception):
    """The lane could not be started or stopped; the message says what to look at."""


# --------------------------------------------------------------------------------------------
# State: which processes this lane started (so ``stop`` works from another process).


@dataclass
class Proc:
    name: str
    pid: int
    start_ticks: int  # /proc/<pid>/stat field 22: tells a live process from a recycled pid
    log: str
    argv: list[str] = field(default_factory=list)  # lane-control restarts kube-apiserver with these


@dataclass
class LaneState:
    state_dir: str
    server: str = ""  # the front door: what the tests' kubeconfig points at
    apiserver: str = ""  # kube-apiserver itself (the components' kubeconfig)
    kubeconfig: str = ""
    control: str = ""  # lane-control's URL (MP_REAL_LANE_CONTROL)
    ports: dict[str, int] = field(default_factory=dict)
    processes: list[Proc] = field(default_factory=list)

    def find(self, name: str) -> Proc | None:
        return next((p for p in self.processes if p.name == name), None)

    @property
    def path(self) -> Path:
        return Path(self.state_dir) / "lane.json"

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2), encoding="utf-8")
        tmp.replace(self.path)

    @classmethod
    def load(cls, state_dir: Path) -> LaneState | None:
        path = state_dir / "lane.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        data["processes"] = [Proc(**p) for p in data.get("processes", [])]
        return cls(**data)


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name, or None if the pid does not exist."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def start_ticks(pid: int) -> int:
    fields = _stat(pid)
    return int(fields[19]) if fields else -1


def is_ours(proc: Proc) -> bool:
    """The pid still names the process we started (and it is not a zombie)."""
    fields = _stat(proc.pid)
    return bool(fields) and fields[0] != "Z" and int(fields[19]) == proc.start_ticks


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def _reap(pid: int) -> None:
    """Collect our own exited children so they do not linger as zombies."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


# --------------------------------------------------------------------------------------------
# PKI, token and kubeconfig


def write_private(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)


def make_pki(pki: Path) -> dict[str, Path]:
    """A CA, the apiserver's serving certificate (127.0.0.1 / localhost / kubernetes.default...) and the SA key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    def pem_key(key: Any) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "metalplane-k8s-real-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    names = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
    names.append("kubernetes.default.svc.cluster.local")
    san = x509.SubjectAlternativeName(
        [x509.DNSName(n) for n in names]
        + [x509.IPAddress(ipaddress.ip_address(LOOPBACK)), x509.IPAddress(ipaddress.ip_address("10.96.0.1"))]
    )
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(san, critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files = {
        "ca": pki / "ca.crt",
        "server_cert": pki / "apiserver.crt",
        "server_key": pki / "apiserver.key",
        "sa_key": pki / "sa.key",
    }
    write_private(files["ca"], ca_cert.public_bytes(serialization.Encoding.PEM))
    write_private(files["server_cert"], server_cert.public_bytes(serialization.Encoding.PEM))
    write_private(files["server_key"], pem_key(server_key))
    write_private(files["sa_key"], pem_key(sa_key))
    return files


def kubeconfig_yaml(server: str, ca_pem: bytes, token: str) -> bytes:
    """The lane's kubeconfig: TLS verified against the lane's CA, bearer token, namespace default."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "k8s-real",
                "cluster": {"server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode()},
            }
        ],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "k8s-real", "context": {"cluster": "k8s-real", "user": "admin", "namespace": "default"}}],
        "current-context": "k8s-real",
    }
    return yaml.safe_dump(config, sort_keys=False).encode()


# --------------------------------------------------------------------------------------------
# Probes


def _https_ok(url: str, context: ssl.SSLContext, token: str | None = None) -> Poll[str]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            body = response.read().decode("utf-8", "replace").strip()
            return Poll(response.status == 200, f"{response.status} {body[:200]}")
    except urllib.error.HTTPError as exc:
        return Poll(False, f"{exc.code} {exc.read().decode('utf-8', 'replace')[:300]}")
    except (urllib.error.URLError, OSError) as exc:
        return Poll(False, f"unreachable: {exc}")


class Lane:
    """One control plane in one state directory."""

    def __init__(
        self,
        state_dir: Path,
        bin_dir: Path = DEFAULT_BIN,
        *,
        nodes: int = 2,
        gpus: int = 8,
        controllers: bool = True,
        node_labels: list[str] | None = None,
        python: str = sys.executable,
        timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        self.state_dir = state_dir.resolve()
        self.bin_dir = bin_dir
        self.nodes = nodes
        self.gpus = gpus
        self.controllers = controllers
        self.node_labels = node_labels or []
        self.python = python
        self.timeout = timeout
        self.state = LaneState(state_dir=str(self.state_dir))
        self._deadline = 0.0

    # -- helpers -------------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        """The tests' kubeconfig: through the front door, as user ``admin``."""
        return self.state_dir / "kubeconfig"

    @property
    def components_kubeconfig(self) -> Path:
        """The control plane's own kubeconfig: straight to the apiserver, as ``lane-components``."""
        return self.state_dir / "kubeconfig-components"

    def _remaining(self) -> float:
        return max(1.0, self._deadline - time.monotonic())

    def _binary(self, name: str) -> str:
        path = self.bin_dir / name
        if not os.access(path, os.X_OK):
            raise LaneError(f"{path} is missing: run scripts/k8s-real/build.sh first (or pass --bin-dir)")
        return str(path)

    def _spawn(self, name: str, argv: list[str]) -> Proc:
        log = self.state_dir / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.state_dir,
                start_new_session=True,  # own process group: stop() kills the whole group
            )
        proc = Proc(name=name, pid=popen.pid, start_ticks=start_ticks(popen.pid), log=str(log), argv=list(argv))
        self.state.processes.append(proc)
        self.state.save()
        return proc

    def _await(self, what: str, probe: Callable[[], Poll[str]], proc: Proc | None = None) -> None:
        def observe() -> Poll[str]:
            if proc is not None and not is_ours(proc):
                raise LaneError(f"{proc.name} exited during start-up; see {proc.log}:\n{tail(Path(proc.log))}")
            return probe()

        try:
            wait_for(observe, timeout=self._remaining(), what=what, backoff=PROBE_BACKOFF)
        except WaitTimeout as exc:
            logs = f"; see {proc.log}:\n{tail(Path(proc.log))}" if proc else ""
            raise LaneError(f"{exc}{logs}") from exc

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> LaneState:
        previous = LaneState.load(self.state_dir)
        if previous and any(is_ours(p) for p in previous.processes):
            raise LaneError(f"a lane is already running from {self.state_dir}; run `lane.py stop` first")
        self._deadline = time.monotonic() + self.timeout
        binaries = {n: self._binary(n) for n in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")}
        stale_files = ("etcd", "pki", "logs", "kubeconfig", "kubeconfig-components", "tokens.csv", "control.token")
        for stale in (*stale_files, "audit-policy.yaml", "lane.json"):
            target = self.state_dir / stale
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start(binaries)
        except BaseException:
            self.stop()
            raise
        return self.state

    def _start(self, binaries: dict[str, str]) -> None:
        pki = make_pki(self.state_dir / "pki")
        token, components_token = secrets.token_hex(24), secrets.token_hex(24)
        tokens = self.state_dir / "tokens.csv"
        write_private(
            tokens,
            f"{token},{TEST_USER},{TEST_USER},system:masters\n"
            f"{components_token},{COMPONENTS_USER},{COMPONENTS_USER},system:masters\n".encode(),
        )
        write_private(self.state_dir / "control.token", token.encode())
        audit_policy = self.state_dir / "audit-policy.yaml"
        audit_policy.write_text(yaml.safe_dump(AUDIT_POLICY, sort_keys=False), encoding="utf-8")
        names = ("etcd", "etcd_peer", "etcd_metrics", "apiserver", "kcm", "scheduler", "front", "control")
        ports = {name: free_port() for name in (*names, "kubelet_control")}
        self.state.ports = ports

        etcd = self._spawn(
            "etcd",
            [
                binaries["etcd"],
                "--name=default",
                f"--data-dir={self.state_dir / 'etcd'}",
                f"--listen-client-urls=http://{LOOPBACK}:{ports['etcd']}",
                f"--advertise-client-urls=http://{LOOPBACK}:{ports['etcd']}",
                f"--listen-peer-urls=http://{LOOPBACK}:{ports['etcd_peer']}",
                f"--initial-advertise-peer-urls=http://{LOOPBACK}:{ports['etcd_peer']}",
                f"--initial-cluster=default=http://{LOOPBACK}:{ports['etcd_peer']}",
                f"--listen-metrics-urls=http://{LOOPBACK}:{ports['etcd_metrics']}",
                "--log-level=warn",
            ],
        )
        self._await("etcd /health", lambda: _http_health(f"http://{LOOPBACK}:{ports['etcd']}/health"), etcd)

        server = f"https://{LOOPBACK}:{ports['apiserver']}"
        apiserver = self._spawn(
            "kube-apiserver",
            [
                binaries["kube-apiserver"],
                f"--etcd-servers=http://{LOOPBACK}:{ports['etcd']}",
                f"--token-auth-file={tokens}",
                f"--bind-address={LOOPBACK}",
                f"--advertise-address={LOOPBACK}",
                f"--secure-port={ports['apiserver']}",
                f"--tls-cert-file={pki['server_cert']}",
                f"--tls-private-key-file={pki['server_key']}",
                f"--cert-dir={self.state_dir / 'pki'}",
                f"--service-account-issuer={SA_ISSUER}",
                f"--service-account-key-file={pki['sa_key']}",
                f"--service-account-signing-key-file={pki['sa_key']}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=AlwaysAllow",
                "--disable-admission-plugins=ServiceAccount",
                "--allow-privileged=true",
                "--profiling=false",
                f"--audit-policy-file={audit_policy}",
                f"--audit-log-path={self.state_dir / 'logs' / 'audit.log'}",
                "--audit-log-format=json",
                "--audit-log-maxsize=2048",  # MB: never rotated during a run (lane-control reads one file)
            ],
        )
        verified = ssl.create_default_context(cafile=str(pki["ca"]))
        self._await("kube-apiserver /readyz", lambda: _https_ok(f"{server}/readyz", verified, token), apiserver)

        ca_pem = pki["ca"].read_bytes()
        write_private(self.components_kubeconfig, kubeconfig_yaml(server, ca_pem, components_token))
        self.state.apiserver = server
        self.state.save()

        api = KubeHttp(Target.from_kubeconfig(self.components_kubeconfig))
        if self.controllers:
            self._start_controllers(binaries, pki, api)
        if self.nodes > 0:
            self._start_kubelet(api)
        self._start_control(ca_pem, token, verified)

    def _start_control(self, ca_pem: bytes, token: str, verified: ssl.SSLContext) -> None:
        """lane-control: the front door the tests' kubeconfig points at, and the fault-injection API."""
        ports = self.state.ports
        front = f"https://{LOOPBACK}:{ports['front']}"
        control_url = f"http://{LOOPBACK}:{ports['control']}"
        argv = [self.python, str(Path(__file__).resolve()), "control", f"--state-dir={self.state_dir}"]
        control = self._spawn("lane-control", argv)
        self._await("lane-control", lambda: _control_ok(control_url, token), control)
        probe = f"{front}/readyz"
        self._await("kube-apiserver /readyz through the front door", lambda: _https_ok(probe, verified, token), control)
        write_private(self.kubeconfig, kubeconfig_yaml(front, ca_pem, token))
        self.state.server = front
        self.state.control = control_url
        self.state.kubeconfig = str(self.kubeconfig)
        self.state.save()

    def _start_controllers(self, binaries: dict[str, str], pki: dict[str, Path], api: KubeHttp) -> None:
        kc = str(self.components_kubeconfig)
        common = [
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--leader-elect=false",
            f"--bind-address={LOOPBACK}",
            "--port=0",
            "--profiling=false",
        ]
        kcm = self._spawn(
            "kube-controller-manager",
            [
                binaries["kube-controller-manager"],
                *common,
                f"--secure-port={self.state.ports['kcm']}",
                f"--cert-dir={self.state_dir / 'pki' / 'kcm'}",
                "--controllers=*,-serviceaccount-token",
                "--use-service-account-credentials=false",
                f"--root-ca-file={pki['ca']}",
            ],
        )
        scheduler = self._spawn(
            "kube-scheduler",
            [
                binaries["kube-scheduler"],
                *common,
                f"--secure-port={self.state.ports['scheduler']}",
                f"--cert-dir={self.state_dir / 'pki' / 'scheduler'}",
            ],
        )
        # Their serving certificates are self-signed by each component: a liveness probe only.
        unverified = ssl.create_default_context()
        unverified.check_hostname = False
        unverified.verify_mode = ssl.CERT_NONE
        for proc, port in ((kcm, self.state.ports["kcm"]), (scheduler, self.state.ports["scheduler"])):
            self._await(
                f"{proc.name} /healthz", lambda p=port: _https_ok(f"https://{LOOPBACK}:{p}/healthz", unverified), proc
            )
        # The serviceaccount controller creating "default" shows the controller loops really run.
        self._await(
            "the controller-manager to create ServiceAccount default/default",
            lambda: _exists(api, "/api/v1/namespaces/default/serviceaccounts/default"),
            kcm,
        )

    def _start_kubelet(self, api: KubeHttp) -> None:
        argv = [
            self.python,
            str(FAKE_KUBELET),
            f"--kubeconfig={self.components_kubeconfig}",
            f"--nodes={self.nodes}",
            f"--gpus={self.gpus}",
            f"--control-port={self.state.ports['kubelet_control']}",
            f"--control-token-file={self.state_dir / 'control.token'}",
        ]
        argv += [f"--label={label}" for label in self.node_labels]
        kubelet = self._spawn("fake-kubelet", argv)
        self._await(f"{self.nodes} Ready node(s)", lambda: _nodes_ready(api, self.nodes), kubelet)

    # -- stop ----------------------------------------------------------------------------------
    def stop(self) -> list[str]:
        """Stop every process group this lane started (newest first); return what had to be killed."""
        state = LaneState.load(self.state_dir) or self.state
        return stop_processes(state.processes, state.path)


# Stop order: every client of the apiserver first, then kube-apiserver, then etcd. An apiserver
# told to stop while controllers still hold watches waits for those connections (1.20 drains them
# for up to its 60 s request timeout), and one whose etcd is gone keeps reconnecting to it.
STOP_RANK = {"kube-apiserver": 1, "etcd": 2}


def stop_processes(processes: list[Proc], state_file: Path | None = None) -> list[str]:
    """SIGTERM each process group (clients, then kube-apiserver, then etcd), SIGKILL what outlives
    ``STOP_GRACE``, check every group is empty; return the names that needed SIGKILL."""
    killed: list[str] = []
    live = [p for p in reversed(processes) if is_ours(p)]
    for rank in range(max(STOP_RANK.values()) + 1):
        killed += _terminate([p for p in live if STOP_RANK.get(p.name, 0) == rank])
    leftovers = {p.name: group_members(p.pid) for p in live if group_members(p.pid)}
    if leftovers:
        raise LaneError(f"processes survived SIGKILL: {leftovers}")
    if state_file is not None and state_file.exists():
        state_file.unlink()
    return killed


def _terminate(procs: list[Proc], grace: float = STOP_GRACE) -> list[str]:
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    pending = list(procs)
    while pending and time.monotonic() < deadline:
        for proc in pending:
            _reap(proc.pid)
        pending = [p for p in pending if group_members(p.pid)]
        if pending:
            time.sleep(0.2)
    for proc in pending:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    for proc in pending:
        for _attempt in range(50):
            _reap(proc.pid)
            if not group_members(proc.pid):
                break
            time.sleep(0.1)
    return [p.name for p in pending]


def _http_health(url: str) -> Poll[str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = response.read().decode("utf-8", "replace")
            return Poll('"health":"true"' in body.replace(" ", ""), body)
    except (urllib.error.URLError, OSError) as exc:
        return Poll(False, f"unreachable: {exc}")


def _exists(api: KubeHttp, path: str) -> Poll[str]:
    try:
        api.get(path)
    except KubeHttpError as exc:
        return Poll(False, str(exc))
    except OSError as exc:
        return Poll(False, f"unreachable: {exc}")
    return Poll(True, "exists")


def _nodes_ready(api: KubeHttp, want: int) -> Poll[str]:
    try:
        items = api.get("/api/v1/nodes")["items"]
    except (KubeHttpError, OSError) as exc:
        return Poll(False, str(exc))
    ready = [
        n["metadata"]["name"]
        for n in items
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
    ]
    return Poll(len(ready) >= want, f"ready: {ready}")


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _control_ok(url: str, token: str) -> Poll[str]:
    request = urllib.request.Request(url + "/", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return Poll(response.status == 200, f"{response.status}")
    except urllib.error.HTTPError as exc:
        return Poll(False, f"{exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        return Poll(False, f"unreachable: {exc}")


# --------------------------------------------------------------------------------------------
# lane-control: the front door, apiserver outages, the audit-log request record, kubelet control


class AuditLog:
    """The apiserver's audit log read incrementally: one record per request of the tests' user.

    The policy logs only ``list`` and ``watch`` of ``admin`` at level Metadata without the
    RequestReceived stage, so a list appears once (ResponseComplete) and a watch first when its
    response starts (ResponseStarted: the stream is open) and again when it ends; the first event
    of each auditID is the record. Records keep the order the apiserver wrote them in.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self._seen: set[str] = set()
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def refresh(self) -> list[dict[str, Any]]:
        with self._lock:
            try:
                with self.path.open("rb") as handle:
                    handle.seek(self._offset)
                    chunk = handle.read()
            except FileNotFoundError:
                return self.records
            self._offset += len(chunk)
            lines = (self._partial + chunk).split(b"\n")
            self._partial = lines.pop()  # an incomplete last line waits for the next read
            for line in lines:
                if line.strip():
                    self._add(json.loads(line))
            return self.records

    def _add(self, event: dict[str, Any]) -> None:
        audit_id = event.get("auditID", "")
        if audit_id in self._seen or event.get("stage") not in ("ResponseStarted", "ResponseComplete"):
            return
        self._seen.add(audit_id)
        uri = urllib.parse.urlsplit(event.get("requestURI", ""))
        self.records.append(
            {
                "verb": event.get("verb"),
                "path": uri.path,
                "query": uri.query,
                "status": (event.get("responseStatus") or {}).get("code"),
                "stage": event.get("stage"),
                "user_agent": event.get("userAgent", ""),
                "time": event.get("stageTimestamp"),
            }
        )


class ControlBusy(Exception):
    """Another apiserver outage or restart is in progress."""


class LaneController:
    """What ``lane.py control`` serves: see the module docstring and docs/testing/k8s-real.md."""

    def __init__(self, state_dir: Path) -> None:
        state = LaneState.load(state_dir)
        if state is None:
            raise LaneError(f"no lane.json in {state_dir}: lane-control is started by `lane.py start`")
        self.state_dir = state_dir
        self.ports = state.ports
        self.token = (state_dir / "control.token").read_text(encoding="utf-8").strip()
        self.front = FrontDoor(LOOPBACK, state.ports["front"], (LOOPBACK, state.ports["apiserver"]))
        self.audit = AuditLog(state_dir / "logs" / "audit.log")
        self.verified = ssl.create_default_context(cafile=str(state_dir / "pki" / "ca.crt"))
        self.apiserver_url = state.apiserver
        self._operation = threading.Lock()  # one outage/restart at a time
        self._up = threading.Event()
        self._up.set()
        self.restarts = 0
        self.last_error = ""
        self._children: list[subprocess.Popen[bytes]] = []

    # -- apiserver -------------------------------------------------------------------------------
    def _apiserver(self) -> Proc:
        state = LaneState.load(self.state_dir)
        proc = state.find("kube-apiserver") if state else None
        if proc is None or not proc.argv:
            raise LaneError("lane.json records no kube-apiserver (with its argv) to restart")
        return proc

    def _stop_apiserver(self, proc: Proc) -> None:
        if not is_ours(proc):
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + OUTAGE_STOP_GRACE
        while group_members(proc.pid) and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.1)
        if group_members(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            while group_members(proc.pid):
                self._reap()
                time.sleep(0.1)

    def _reap(self) -> None:
        for child in list(self._children):
            if child.poll() is not None:
                self._children.remove(child)

    def _start_apiserver(self, old: Proc) -> Proc:
        """The same argv (flags, certificates, etcd, audit log), a new process group; lane.json updated."""
        with open(old.log, "ab") as out:
            out.write(f"\n---- lane-control: restarting kube-apiserver ({time.ctime()}) ----\n".encode())
            out.flush()
            popen = subprocess.Popen(
                old.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.state_dir, start_new_session=True,
            )  # fmt: skip
        self._children.append(popen)
        new = Proc(name=old.name, pid=popen.pid, start_ticks=start_ticks(popen.pid), log=old.log, argv=old.argv)
        state = LaneState.load(self.state_dir)
        if state is not None:
            state.processes = [new if p.name == old.name else p for p in state.processes]
            state.save()
        return new

    def _await_ready(self, proc: Proc) -> None:
        def observe() -> Poll[str]:
            if not is_ours(proc):
                raise LaneError(f"kube-apiserver exited while restarting; see {proc.log}:\n{tail(Path(proc.log))}")
            return _https_ok(f"{self.apiserver_url}/readyz", self.verified, self.token)

        wait_for(observe, timeout=DEFAULT_START_TIMEOUT, what="kube-apiserver /readyz", backoff=PROBE_BACKOFF)

    def outage(self, seconds: float, wait: bool) -> dict[str, Any]:
        """Refuse clients, stop kube-apiserver, and ``seconds`` later start it again (in the background).

        The front door closes first (clients see connections refused, as with no apiserver at all)
        and reopens only once the restarted apiserver answers /readyz, so no client ever meets a
        half-started server (on 1.20 custom resources answer 404 until their informers sync).
        """
        if not 0 <= seconds <= MAX_OUTAGE_SECONDS:
            raise ValueError(f"seconds must be between 0 and {MAX_OUTAGE_SECONDS:g}")
        if not self._operation.acquire(blocking=False):
            raise ControlBusy("an apiserver outage or restart is already in progress")
        try:
            old = self._apiserver()
            self._up.clear()
            dropped = self.front.close()
            stopped_at = time.monotonic()
            self._stop_apiserver(old)
        except BaseException:
            self._up.set()
            self.front.open()
            self._operation.release()
            raise
        down = {"dropped": dropped, "stopped_pid": old.pid, "stop_seconds": round(time.monotonic() - stopped_at, 2)}
        thread = threading.Thread(target=self._come_back, args=(old, seconds), daemon=True, name="restart")
        thread.start()
        if wait:
            thread.join()
        return {**down, **self.describe()["apiserver"]}

    def _come_back(self, old: Proc, seconds: float) -> None:
        try:
            time.sleep(seconds)
            new = self._start_apiserver(old)
            self._await_ready(new)
            self.restarts += 1
            self.last_error = ""
        except (LaneError, WaitTimeout, OSError) as exc:
            self.last_error = str(exc)
        finally:
            self.front.open()
            self._up.set()
            self._operation.release()

    def wait_up(self, timeout: float) -> bool:
        return self._up.wait(timeout)

    # -- kubelet ---------------------------------------------------------------------------------
    def forward_to_kubelet(self, method: str, path: str, body: bytes) -> tuple[int, bytes]:
        port = self.ports.get("kubelet_control")
        url = f"http://{LOOPBACK}:{port}{path}"
        request = urllib.request.Request(url, data=body or None, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            return 502, json.dumps({"error": f"the fake kubelet's control API is unreachable: {exc}"}).encode()

    def describe(self) -> dict[str, Any]:
        state = LaneState.load(self.state_dir)
        proc = state.find("kube-apiserver") if state else None
        return {
            "apiserver": {
                "up": self._up.is_set() and proc is not None and is_ours(proc),
                "pid": proc.pid if proc else None,
                "restarts": self.restarts,
                "last_error": self.last_error,
            },
            "front_door": {
                "open": self.front.is_open,
                "connections": self.front.connections,
                "accepted": self.front.accepted,
                "dropped": self.front.dropped,
            },
            "audit_records": len(self.audit.refresh()),
        }


class ControlHttp(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, controller: LaneController) -> None:
        self.controller = controller
        super().__init__((LOOPBACK, controller.ports["control"]), ControlHandler)


class ControlHandler(TokenJsonHandler):
    """The lane-control HTTP API (JSON; ``Authorization: Bearer <the kubeconfig's token>``)."""

    server: ControlHttp
    TOKEN_HINT = "send the lane kubeconfig's bearer token"

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{time.strftime('%H:%M:%S')} lane-control: {format % args}\n")

    def token(self) -> str:
        return self.server.controller.token

    def _handle(self, method: str) -> None:
        controller = self.server.controller
        if not self.authorized():
            return
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        url = urllib.parse.urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        query = dict(urllib.parse.parse_qsl(url.query))
        if path.startswith("/kubelet/") or path == "/kubelet":
            forwarded = path.removeprefix("/kubelet") or "/"
            self._send(*controller.forward_to_kubelet(method, forwarded, raw))
            return
        try:
            body = json.loads(raw) if raw.strip() else {}
            self._reply(*self._route(controller, method, path, query, body))
        except ControlBusy as exc:
            self._reply(409, {"error": str(exc)})
        except (TypeError, ValueError) as exc:
            self._reply(400, {"error": str(exc)})
        except (LaneError, WaitTimeout, OSError) as exc:
            self._reply(500, {"error": str(exc)})

    @staticmethod
    def _route(
        controller: LaneController, method: str, path: str, query: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, Any]:
        if method == "GET" and path == "/":
            return 200, controller.describe()
        if method == "POST" and path in ("/apiserver/outage", "/apiserver/restart"):
            seconds = float(body.get("seconds", 0)) if path.endswith("outage") else 0.0
            wait = bool(body.get("wait", True))
            return (200 if wait else 202), controller.outage(seconds, wait)
        if method == "GET" and path == "/apiserver/wait":
            up = controller.wait_up(float(query.get("timeout", DEFAULT_START_TIMEOUT)))
            return (200 if up else 504), controller.describe()["apiserver"]
        if method == "POST" and path == "/watches/drop":
            return 200, {"dropped": controller.front.drop()}
        if method == "GET" and path == "/requests":
            records = controller.audit.refresh()
            since = int(query.get("since", 0))
            return 200, {"next": len(records), "requests": records[since:]}
        return 404, {"error": f"no control endpoint {method} {path}"}


def cmd_control(args: argparse.Namespace) -> int:
    """Serve lane-control until SIGTERM (``lane.py stop`` sends it, like to every component)."""
    controller = LaneController(args.state_dir.resolve())
    controller.front.open()
    server = ControlHttp(controller)
    stopping = threading.Event()

    def _on_term(_signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    threading.Thread(target=server.serve_forever, name="control-http", daemon=True).start()
    print(f"lane-control on {LOOPBACK}:{controller.ports['control']}, front door on "
          f"{LOOPBACK}:{controller.ports['front']}", file=sys.stderr, flush=True)  # fmt: skip
    stopping.wait()
    server.shutdown()
    server.server_close()
    controller.front.close()
    return 0


# --------------------------------------------------------------------------------------------
# Command line


def _lane_from(args: argparse.Namespace) -> Lane:
    return Lane(
        args.state_dir,
        args.bin_dir,
        nodes=args.nodes,
        gpus=args.gpus,
        controllers=not args.no_controllers,
        node_labels=args.label,
        timeout=args.timeout,
    )


def _print_started(state: LaneState, started: float) -> None:
    names = ", ".join(f"{p.name}={p.pid}" for p in state.processes)
    print(f"k8s-real lane up in {time.monotonic() - started:.1f}s: {state.server}", file=sys.stderr)
    print(f"  kubeconfig: {state.kubeconfig}\n  control: {state.control}\n  processes: {names}", file=sys.stderr)


def cmd_start(args: argparse.Namespace) -> int:
    started = time.monotonic()
    state = _lane_from(args).start()
    _print_started(state, started)
    print(state.kubeconfig)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    state = LaneState.load(args.state_dir.resolve())
    if state is None:
        print(f"k8s-real lane: nothing recorded in {args.state_dir}", file=sys.stderr)
        return 0
    killed = stop_processes(state.processes, state.path)
    shutil.rmtree(args.state_dir / "etcd", ignore_errors=True)
    extra = f" (SIGKILL needed for: {', '.join(killed)})" if killed else ""
    print(f"k8s-real lane stopped: {len(state.processes)} process group(s){extra}", file=sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    state = LaneState.load(args.state_dir.resolve())
    if state is None:
        print("not running")
        return 3
    alive = {p.name: is_ours(p) for p in state.processes}
    summary = {"server": state.server, "apiserver": state.apiserver, "kubeconfig": state.kubeconfig}
    print(json.dumps({**summary, "control": state.control, "alive": alive}, indent=2))
    return 0 if alive and all(alive.values()) else 1


def cmd_run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise LaneError("run needs a command after --")
    lane = _lane_from(args)

    def _on_term(signum: int, _frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _on_term)
    started = time.monotonic()
    try:
        state = lane.start()
        _print_started(state, started)
        env = dict(
            os.environ,
            MP_KUBE_TARGET="real",
            MP_REAL_KUBECONFIG=state.kubeconfig,
            MP_REAL_LANE_CONTROL=state.control,
            K8S_REAL_BIN=str(lane.bin_dir),
        )
        return subprocess.run(command, env=env, check=False).returncode
    finally:
        killed = lane.stop()
        shutil.rmtree(lane.state_dir / "etcd", ignore_errors=True)
        extra = f" (SIGKILL needed for: {', '.join(killed)})" if killed else ""
        print(f"k8s-real lane stopped{extra}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    for name in ("start", "stop", "status", "run", "control"):
        p = sub.add_parser(name)
        p.add_argument("--state-dir", type=Path, default=DEFAULT_STATE, help="default %(default)s")
        if name in ("start", "run"):
            p.add_argument("--bin-dir", type=Path, default=DEFAULT_BIN, help="default %(default)s")
            p.add_argument("--nodes", type=int, default=2, help="fake GPU nodes (0 = no fake kubelet)")
            p.add_argument("--gpus", type=int, default=8, help="nvidia.com/gpu per fake node")
            p.add_argument("--label", action="append", default=[], help="extra node label KEY=VALUE")
            p.add_argument("--no-controllers", action="store_true", help="etcd + apiserver only")
            p.add_argument("--timeout", type=float, default=DEFAULT_START_TIMEOUT, help="start-up deadline (s)")
        if name == "run":
            p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    args = parser.parse_args(argv)
    handlers = {"start": cmd_start, "stop": cmd_stop, "status": cmd_status, "run": cmd_run, "control": cmd_control}
    try:
        return handlers[args.action](args)
    except (LaneError, WaitTimeout) as exc:
        print(f"k8s-real lane: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
