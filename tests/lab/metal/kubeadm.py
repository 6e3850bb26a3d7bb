"""The ``kubeadm`` shim (and the kernel settings it checks): a simulated host becomes a one-node cluster.

Why: the collection's ``kubeadm_node`` role runs ``kubeadm init --config`` on the node, then talks to the
cluster through the admin kubeconfig it fetches. A simulated host has no kubelet, no etcd and no API server,
so the shim does what those would, visibly from outside: it validates the configuration as kubeadm's strict
decoder and its preflight checks do (``lab.metal.kubeadm_config``; kernel modules, sysctls, the runtime), then
starts a Kubernetes API (``lab.kube.server.KubeEmulator``) on the host's own address and the configuration's
``bindPort``, writes ``/etc/kubernetes/admin.conf`` onto the host's disk and registers the host as one Node:

- tainted and labelled as kubeadm does (``node-role.kubernetes.io/control-plane``), NotReady with
  ``NetworkPluginNotReady`` until a CNI runs: when a ``k8s-app=cilium`` DaemonSet appears in ``kube-system``
  (the Cilium chart), the "agent" writes its CNI configuration and the kubelet reports Ready;
- with the GPUs of its BMC while the ``nvidia`` module is loaded: the Node Feature Discovery PCI label and
  the lab's NVML annotation (``lab.kube.gpu``), from which the Modelplane emulator publishes DRA slices.

The API authenticates the emulator's admin token (admin.conf carries it beside the admin's client certificate and
key, as a real one carries the certificate; the emulator requests no client certificate) and ServiceAccount token
Secrets (``lab.kube.controllers``), so the credential the
role hands to Modelplane is exercised for real. ``kubeadm reset -f`` stops the API and removes what init wrote;
the host going down suspends it, and booting a disk without ``admin.conf`` (a reinstall) drops it.

``sysctl``, ``swapon`` and ``swapoff`` are shims too: in the host's user namespace the real ones would read
(and fail to write) the lab machine's own kernel settings. They keep the host's settings in a file on its disk.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import secrets
import shutil
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from lab.common.tls import issue_client_certificate
from lab.kube.api import ApiError
from lab.kube.gpu import NFD_NVIDIA_LABEL, NVML_ANNOTATION
from lab.kube.gpu import product as gpu_product
from lab.kube.server import KubeEmulator
from lab.metal.kubeadm_config import ConfigError, InitSettings, parse_version, validate
from lab.metal.shims import Effect, ShimHost, on_host_event, register

try:  # the package database lands with the packages shims (lab.metal.packages)
    from lab.metal.packages import installed as _package_installed
    from lab.metal.packages import service_active as _service_active
except ImportError:  # pragma: no cover - until that branch is merged
    _package_installed = None
    _service_active = None

Obj = dict[str, Any]

ADMIN_CONF = "/etc/kubernetes/admin.conf"
# The organisation of admin.conf's client certificate since kubeadm 1.29 (bound to cluster-admin by the
# kubeadm:cluster-admins ClusterRoleBinding; before, system:masters).
ADMIN_ORGANIZATION = "kubeadm:cluster-admins"
CA_CERT = "/etc/kubernetes/pki/ca.crt"
# What `kubeadm init` writes and `kubeadm reset` removes (kubeadm reset: "Deleting files" and "Deleting contents of
# directories" in cmd/kubeadm/app/cmd/phases/reset/cleanupnode.go).
INIT_FILES = (ADMIN_CONF, "/etc/kubernetes/super-admin.conf", "/etc/kubernetes/kubelet.conf")
INIT_DIRS = ("/etc/kubernetes/pki", "/etc/kubernetes/manifests", "/var/lib/kubelet", "/var/lib/etcd")
MANIFESTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd")
CNI_CONF = "/etc/cni/net.d/05-cilium.conflist"  # what the Cilium agent writes (cni.confFileMountPath default)
CILIUM_LABEL = ("k8s-app", "cilium")  # the label of the Cilium chart's agent DaemonSet
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
CONTROL_PLANE_TAINT = {"key": CONTROL_PLANE_LABEL, "effect": "NoSchedule"}
# Seconds (scaled by the lab's delay scale) from the CNI agent's start to the kubelet reporting Ready.
CNI_READY_SECONDS = 2.0
SYNC_SECONDS = 0.25  # how often a node's GPU labels follow the host's loaded modules
# The lab's kubeadm when no package database says otherwise (lab.metal.packages not merged yet).
LAB_KUBEADM_VERSION = "v1.34.2"
# kubeadm preflight checks (cmd/kubeadm/app/preflight/checks.go) and the kernel state each reads.
SYSCTL_STATE = "/var/lib/metal-lab/sysctl.json"
BRIDGE_SYSCTLS = ("net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables")
KERNEL_DEFAULTS = {"net.ipv4.ip_forward": "0", "net.ipv6.conf.all.forwarding": "0"}
BRIDGE_DEFAULT = "1"  # what the bridge sysctls read once br_netfilter is loaded (kernel default)


# ------------------------------------------------------------------------------ sysctl / swap
def _sysctl_state(host: ShimHost) -> dict[str, str]:
    raw = host.disk.read(SYSCTL_STATE)
    values = dict(KERNEL_DEFAULTS)
    if raw:
        with contextlib.suppress(ValueError):
            values.update(json.loads(raw))
    return values


def sysctl_value(host: ShimHost, key: str) -> str | None:
    """A kernel setting of ``host`` as /proc/sys would show it (None: no such key, its module not loaded)."""
    key = key.replace("/", ".")
    if key in BRIDGE_SYSCTLS:
        return _sysctl_state(host).get(key, BRIDGE_DEFAULT) if "br_netfilter" in host.modules else None
    return _sysctl_state(host).get(key)


def _sysctl_set(host: ShimHost, key: str, value: str) -> str | None:
    key = key.replace("/", ".")
    if key in BRIDGE_SYSCTLS and "br_netfilter" not in host.modules:
        return f"sysctl: cannot stat /proc/sys/{key.replace('.', '/')}: No such file or directory\n"
    state = {k: v for k, v in _sysctl_state(host).items() if KERNEL_DEFAULTS.get(k) != v}
    state[key] = value
    host.disk.write(SYSCTL_STATE, json.dumps(state, sort_keys=True).encode())
    return None


def _sysctl_file(host: ShimHost, path: str) -> list[tuple[str, str]]:
    raw = host.disk.read(path) or b""
    pairs = []
    for raw_line in raw.decode(errors="replace").splitlines():
        line = raw_line.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, value = line.lstrip("-").split("=", 1)
        pairs.append((key.strip(), value.strip()))
    return pairs


def sysctl(argv: list[str], host: ShimHost) -> Effect:
    """``sysctl --system``, ``-p [file]``, ``-w k=v``, ``[-n] key``: the host's settings, kept on its disk."""
    args = argv[1:]
    quiet = "-q" in args or "--quiet" in args
    names = "-n" in args or "--values" in args
    words = [a for a in args if not a.startswith("-")]
    out, err = [], []
    if "--system" in args:
        directory = host.disk.host_path("/etc/sysctl.d")
        files = sorted(p.name for p in directory.glob("*.conf")) if directory.is_dir() else []
        assignments = [(f"/etc/sysctl.d/{n}", p) for n in files for p in _sysctl_file(host, f"/etc/sysctl.d/{n}")]
        assignments += [("/etc/sysctl.conf", p) for p in _sysctl_file(host, "/etc/sysctl.conf")]
    elif "-p" in args or "--load" in args:
        assignments = [(w, p) for w in words or ["/etc/sysctl.conf"] for p in _sysctl_file(host, _absolute(w))]
    elif "-w" in args or any("=" in w for w in words):
        assignments = [("", tuple(w.split("=", 1))) for w in words]  # type: ignore[misc]
    else:
        for key in words:
            value = sysctl_value(host, key)
            if value is None:
                err.append(f"sysctl: cannot stat /proc/sys/{key.replace('.', '/')}: No such file or directory\n")
            else:
                out.append(f"{value}\n" if names else f"{key} = {value}\n")
        return Effect(rc=1 if err else 0, stdout="".join(out), stderr="".join(err))
    for source, (key, value) in assignments:
        if source and "--system" in args and not quiet:
            out.append(f"* Applying {source} ...\n")
        problem = _sysctl_set(host, key, value)
        if problem:
            err.append(problem)
        elif not quiet:
            out.append(f"{key} = {value}\n")
    return Effect(rc=1 if err else 0, stdout="".join(out), stderr="".join(err))


def swapon(argv: list[str], host: ShimHost) -> Effect:
    """``swapon --show``: the simulated host has no swap device (its installer made none)."""
    del host
    if "--show" in argv or "-s" in argv or "--summary" in argv:
        return Effect()
    return Effect(rc=1, stderr="swapon: the lab's simulated host has no swap device\n")


def swapoff(argv: list[str], host: ShimHost) -> Effect:
    """``swapoff -a``: nothing to switch off (no swap device), as on a host installed without swap."""
    del host
    if "-a" in argv or "--all" in argv:
        return Effect()
    return Effect(rc=1, stderr=f"swapoff: {' '.join(argv[1:]) or 'no device'}: not a swap device\n")


# ------------------------------------------------------------------------------ the cluster of one host
def installed_version(host: ShimHost, package: str) -> str | None:
    """The package database's version of ``package`` (``lab.metal.packages``); the lab's kubeadm without it."""
    if _package_installed is None:
        return LAB_KUBEADM_VERSION.lstrip("v") if package == "kubeadm" else "lab"
    return _package_installed(host, package)


def runtime_active(host: ShimHost) -> bool:
    """Whether containerd runs (``lab.metal.packages.service_active``; assumed without the package shims)."""
    return True if _service_active is None else bool(_service_active(host, "containerd"))


def kubeadm_version(host: ShimHost) -> str | None:
    """``v1.34.2`` from an installed ``1.34.2-1.1`` package (None: kubeadm is not installed)."""
    version = installed_version(host, "kubeadm")
    if not version:
        return None
    major, minor, patch = parse_version(version.split("-", 1)[0])
    return f"v{major}.{minor}.{patch}"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _absolute(path: str) -> str:
    """A path the command names, inside the host: the shim program forwards no cwd to handlers, so a relative
    path is taken from / (the role passes absolute paths)."""
    return str(PurePosixPath("/") / path)


@dataclass
class NodeCluster:
    """The API server, kubelet and CNI of one host, as far as the outside can see them."""

    host: ShimHost
    api: KubeEmulator
    node_name: str
    settings: InitSettings
    cni_ready: bool = False
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> NodeCluster:
        self.api.server_api.on_write.append(self._on_write)
        self._thread = threading.Thread(target=self._loop, name=f"kubelet-{self.node_name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.api.stop()

    # --- the kubelet's view ---------------------------------------------------------------------
    def _on_write(self, rtype: Any, event: str, obj: Obj, old: Obj | None) -> None:
        del old
        if rtype.kind != "DaemonSet" or event == "DELETED" or self.cni_ready:
            return
        meta = obj["metadata"]
        if (
            meta.get("namespace") == "kube-system"
            and (meta.get("labels") or {}).get(CILIUM_LABEL[0]) == CILIUM_LABEL[1]
        ):
            self.api.scheduler.schedule(CNI_READY_SECONDS * self.api.delay_scale, self.network_ready)

    def network_ready(self) -> None:
        """The CNI agent is up: its configuration lands in /etc/cni/net.d and the kubelet reports Ready."""
        if self.cni_ready:
            return
        self.cni_ready = True
        conflist = {"cniVersion": "0.3.1", "name": "cilium", "plugins": [{"type": "cilium-cni", "enable-debug": False}]}
        self.host.disk.write(CNI_CONF, json.dumps(conflist, indent=2).encode())
        node = self.api.get("v1", "Node", self.node_name)
        if node is None:
            return
        taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != NOT_READY_TAINT["key"]]
        self.api.patch("v1", "Node", self.node_name, {"spec": {"taints": taints or None}})
        self.api.set_status("v1", "Node", self.node_name, {"conditions": [_ready_condition(True)]})

    def gpu_metadata(self) -> tuple[dict[str, str | None], dict[str, str | None]]:
        """The NFD label and NVML annotation the node carries now: present while the driver is loaded."""
        models = list(self.host.gpu_models) if "nvidia" in self.host.modules else []
        if not models:
            return {NFD_NVIDIA_LABEL: None}, {NVML_ANNOTATION: None}
        gpus = []
        for model in models:
            try:
                memory = gpu_product(model).memory_mib
            except ValueError as exc:
                self.errors.append(str(exc))
                return {NFD_NVIDIA_LABEL: "true"}, {NVML_ANNOTATION: None}
            gpus.append({"name": model, "memory_mib": memory})
        return {NFD_NVIDIA_LABEL: "true"}, {NVML_ANNOTATION: json.dumps(gpus)}

    def sync_gpus(self) -> None:
        node = self.api.get("v1", "Node", self.node_name)
        if node is None:
            return
        labels, annotations = self.gpu_metadata()
        have_labels = node["metadata"].get("labels") or {}
        have_annotations = node["metadata"].get("annotations") or {}
        if any(have_labels.get(k) != v for k, v in labels.items()) or any(
            have_annotations.get(k) != v for k, v in annotations.items()
        ):
            self.api.patch("v1", "Node", self.node_name, {"metadata": {"labels": labels, "annotations": annotations}})

    def _loop(self) -> None:
        while not self._stop.wait(SYNC_SECONDS):
            try:
                self.sync_gpus()
            except (ApiError, OSError, ValueError) as exc:  # recorded for the tests; the loop goes on
                self.errors.append(f"{type(exc).__name__}: {exc}")


CLUSTERS: dict[str, NodeCluster] = {}  # host name -> its cluster
_LOCK = threading.RLock()


def cluster_of(host_name: str) -> NodeCluster | None:
    with _LOCK:
        return CLUSTERS.get(host_name)


def _ready_condition(ready: bool) -> Obj:
    stamp = _now()
    if ready:
        reason, message = "KubeletReady", "kubelet is posting ready status"
    else:
        reason = "KubeletNotReady"
        message = (
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
            "message:Network plugin returns error: cni plugin not initialized"
        )
    return {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": stamp,
        "lastTransitionTime": stamp,
    }


def node_object(name: str, address: str, settings: InitSettings) -> Obj:
    """The Node the kubelet registers at init: kubeadm's labels and taints, NotReady until a CNI runs."""
    taints = [dict(CONTROL_PLANE_TAINT)] if settings.taints is None else [dict(t) for t in settings.taints]
    resources = {"cpu": "56", "memory": "256Gi", "pods": "110", "ephemeral-storage": "900Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                CONTROL_PLANE_LABEL: "",
                "node.kubernetes.io/exclude-from-external-load-balancers": "",
            },
            "annotations": {
                "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///var/run/containerd/containerd.sock",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"taints": [*taints, dict(NOT_READY_TAINT)], **_pod_cidr(settings.pod_subnet)},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [_ready_condition(False)],
            "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                "kubeletVersion": settings.kubernetes_version,
                "containerRuntimeVersion": "containerd://1.7.24",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "kernelVersion": "6.1.0-lab",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kubeProxyVersion": "",
            },
        },
    }


def _pod_cidr(pod_subnet: str | None) -> Obj:
    """The node's share of the pod subnet, as kube-controller-manager allocates it (--node-cidr-mask-size 24 for
    IPv4; kubeadm enables --allocate-node-cidrs when podSubnet is set): Cilium's ipam.mode=kubernetes reads it."""
    if not pod_subnet:
        return {}
    network = ipaddress.ip_network(pod_subnet, strict=False)
    block = next(network.subnets(new_prefix=24)) if network.version == 4 and network.prefixlen <= 24 else network
    return {"podCIDR": str(block), "podCIDRs": [str(block)]}


def admin_kubeconfig(api: KubeEmulator, server: str, cluster_name: str) -> str:
    """admin.conf as kubeadm writes it: the admin's client certificate and key (a fresh key per init), and the
    emulator's token beside them, which is what the emulator authenticates."""
    ca_data = base64.b64encode(api.ca_path.read_bytes()).decode()
    user, context = "kubernetes-admin", f"kubernetes-admin@{cluster_name}"
    client = issue_client_certificate(user, ADMIN_ORGANIZATION)
    credentials = {
        "client-certificate-data": base64.b64encode(client.cert_pem).decode(),
        "client-key-data": base64.b64encode(client.key_pem).decode(),
        "token": api.token,
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {"server": server, "certificate-authority-data": ca_data}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": context, "context": {"cluster": cluster_name, "user": user}}],
        "current-context": context,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


# ------------------------------------------------------------------------------ kubeadm
def preflight(host: ShimHost, settings: InitSettings) -> list[str]:
    """kubeadm init's preflight errors for this host (before anything is written)."""
    errors = []
    if host.disk.read(ADMIN_CONF) is not None or cluster_of(host.name) is not None:
        errors.append(("FileAvailable--etc-kubernetes-admin.conf", f"{ADMIN_CONF} already exists"))
    if not runtime_active(host):
        errors.append(("CRI", "container runtime is not running: unix:///var/run/containerd/containerd.sock"))
    if not installed_version(host, "kubelet"):
        errors.append(("FileExisting-kubelet", "kubelet not found in system path"))
    bridge = sysctl_value(host, "net.bridge.bridge-nf-call-iptables")
    if bridge is None:
        errors.append(
            (
                "FileContent--proc-sys-net-bridge-bridge-nf-call-iptables",
                "/proc/sys/net/bridge/bridge-nf-call-iptables does not exist (modprobe br_netfilter)",
            )
        )
    elif bridge != "1":
        errors.append(
            (
                "FileContent--proc-sys-net-bridge-bridge-nf-call-iptables",
                "/proc/sys/net/bridge/bridge-nf-call-iptables contents are not set to 1",
            )
        )
    if sysctl_value(host, "net.ipv4.ip_forward") != "1":
        errors.append(
            ("FileContent--proc-sys-net-ipv4-ip_forward", "/proc/sys/net/ipv4/ip_forward contents are not set to 1")
        )
    address = settings.advertise_address or host.address
    with socket.socket() as probe:
        try:
            probe.bind((address, settings.bind_port))
        except OSError:
            errors.append((f"Port-{settings.bind_port}", f"Port {settings.bind_port} is in use"))
    ignored = {e.lower() for e in settings.ignore_preflight_errors}
    return [f"[ERROR {name}]: {text}" for name, text in errors if "all" not in ignored and name.lower() not in ignored]


def _option(args: list[str], name: str) -> str | None:
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _init(args: list[str], host: ShimHost) -> Effect:
    config_path = _option(args, "--config")
    if not config_path:
        return Effect(rc=1, stderr="the lab's kubeadm needs --config (the collection always passes one)\n")
    raw = host.disk.read(_absolute(config_path))
    if raw is None:
        return Effect(rc=1, stderr=f'unable to read config from "{config_path}" : no such file or directory\n')
    try:
        settings = validate(raw.decode(errors="replace"), kubeadm_version(host))
    except ConfigError as exc:
        return Effect(rc=1, stderr=f"{exc}\nTo see the stack trace of this error execute with --v=5 or higher\n")
    extra = _option(args, "--ignore-preflight-errors")
    if extra:
        settings.ignore_preflight_errors += extra.split(",")
    settings.skip_phases += (_option(args, "--skip-phases") or "").split(",") if _option(args, "--skip-phases") else []
    errors = preflight(host, settings)
    if errors:
        return Effect(
            rc=1,
            stdout="[preflight] Running pre-flight checks\n",
            stderr="error execution phase preflight: [preflight] Some fatal errors occurred:\n\t"
            + "\n\t".join(errors)
            + "\n[preflight] If you know what you are doing, you can make a check non-fatal with "
            "`--ignore-preflight-errors=...`\n",
        )
    return _start_cluster(host, settings)


def _hostname(host: ShimHost) -> str:
    raw = host.disk.read("/etc/hostname")
    return (raw.decode().strip() if raw else "") or host.name


def _start_cluster(host: ShimHost, settings: InitSettings) -> Effect:
    address = settings.advertise_address or host.address
    api = KubeEmulator(
        float(getattr(getattr(host, "shared", None), "delay_scale", 0.0)),
        token=secrets.token_urlsafe(24),
        name=f"metal-{host.name}",
        state_dir=host.directory / "kube-api",
        host=address,
        port=settings.bind_port,
    )
    api.start()
    name = settings.node_name or _hostname(host)
    try:
        api.create(node_object(name, address, settings))
        cluster_config = settings.documents.get("ClusterConfiguration") or {}
        api.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kubeadm-config", "namespace": "kube-system"},
                "data": {"ClusterConfiguration": yaml.safe_dump(cluster_config, sort_keys=False)},
            }
        )
    except ApiError:
        api.stop()
        raise
    server = f"https://{address}:{settings.bind_port}"
    host.disk.write(CA_CERT, api.ca_path.read_bytes(), 0o644)
    host.disk.write(ADMIN_CONF, admin_kubeconfig(api, server, settings.cluster_name).encode(), 0o600)
    for manifest in MANIFESTS:
        spec = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": manifest, "namespace": "kube-system"}}
        host.disk.write(f"/etc/kubernetes/manifests/{manifest}.yaml", yaml.safe_dump(spec).encode(), 0o600)
    cluster = NodeCluster(host, api, name, settings).start()
    with _LOCK:
        CLUSTERS[host.name] = cluster
    cluster.sync_gpus()
    addons = "[addons] Applied essential addon: CoreDNS\n"
    if settings.kube_proxy:
        addons += "[addons] Applied essential addon: kube-proxy\n"
    stdout = (
        "".join(f"{w}\n" for w in settings.warnings)
        + f"[init] Using Kubernetes version: {settings.kubernetes_version}\n"
        "[preflight] Running pre-flight checks\n"
        f'[kubeconfig] Writing "admin.conf" kubeconfig file\n'
        f'[control-plane] Creating static Pod manifests in "/etc/kubernetes/manifests"\n'
        f"[mark-control-plane] Marking the node {name} as control-plane\n"
        + addons
        + "\nYour Kubernetes control-plane has initialized successfully!\n"
    )
    return Effect(stdout=stdout)


def _remove(host: ShimHost, inside: str) -> None:
    target = host.disk.host_path(inside)
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target, ignore_errors=True)
    else:
        target.unlink(missing_ok=True)


def drop_cluster(host_name: str) -> bool:
    """Stop and forget the API of a host (reset, reinstall); False when it had none."""
    with _LOCK:
        cluster = CLUSTERS.pop(host_name, None)
    if cluster is None:
        return False
    cluster.stop()
    return True


def _reset(args: list[str], host: ShimHost) -> Effect:
    if not ({"-f", "--force"} & set(args)):
        return Effect(
            rc=1,
            stdout="[reset] Are you sure you want to proceed? [y/N]: ",
            stderr="won't proceed; the user didn't answer (Y|y) in order to continue\n",
        )
    dropped = drop_cluster(host.name)
    for path in (*INIT_FILES, *INIT_DIRS):
        _remove(host, path)
    stdout = (
        ("[reset] Stopping the kubelet service\n" if dropped else "")
        + "[reset] Deleting contents of directories: [/etc/kubernetes/manifests /var/lib/kubelet /etc/kubernetes/pki]\n"
        "[reset] Deleting files: [/etc/kubernetes/admin.conf /etc/kubernetes/super-admin.conf "
        "/etc/kubernetes/kubelet.conf]\n\n"
        "The reset process does not clean CNI configuration. To do so, you must remove /etc/cni/net.d\n\n"
        "The reset process does not reset or clean up iptables rules or IPVS tables.\n"
    )
    return Effect(stdout=stdout)


def _version(args: list[str], host: ShimHost) -> Effect:
    version = kubeadm_version(host)
    if version is None:
        return Effect(rc=127, stderr="kubeadm: command not found\n")
    output = _option(args, "-o") or _option(args, "--output") or ""
    if output == "short":
        return Effect(stdout=f"{version}\n")
    major, minor, _patch = parse_version(version)
    info = {"major": str(major), "minor": str(minor), "gitVersion": version, "platform": "linux/amd64"}
    if output == "json":
        return Effect(stdout=json.dumps({"clientVersion": info}, indent=2) + "\n")
    return Effect(
        stdout=f'kubeadm version: &version.Info{{Major:"{major}", Minor:"{minor}", GitVersion:"{version}"}}\n'
    )


SUBCOMMANDS: dict[str, Callable[[list[str], ShimHost], Effect]] = {"init": _init, "reset": _reset, "version": _version}


def kubeadm(argv: list[str], host: ShimHost) -> Effect:
    """``kubeadm init --config F`` | ``reset -f`` | ``version [-o short|json]``."""
    if kubeadm_version(host) is None:
        return Effect(rc=127, stderr="kubeadm: command not found\n")
    words = [a for a in argv[1:] if not a.startswith("-")]
    if not words or words[0] not in SUBCOMMANDS:
        return Effect(rc=1, stderr=f"the lab's kubeadm simulates {', '.join(SUBCOMMANDS)}; got {argv[1:]}\n")
    try:
        return SUBCOMMANDS[words[0]](argv[1:], host)
    except (ApiError, OSError) as exc:
        return Effect(rc=1, stderr=f"kubeadm (lab): {type(exc).__name__}: {exc}\n")


def host_event(host: ShimHost, event: str) -> None:
    """The host's OS stopped (``halt``: the API goes quiet) or started (``boot``: it answers again if the disk still
    holds ``admin.conf``, else, after a wipe and reinstall, it is gone); ``stop``: the lab shuts down."""
    cluster = cluster_of(host.name)
    if cluster is None:
        return
    if event == "halt":
        cluster.api.suspend()
    elif event == "boot" and host.disk.read(ADMIN_CONF) is not None:
        cluster.api.resume()
    else:
        drop_cluster(host.name)


register("kubeadm", "bin", kubeadm)
register("sysctl", "sbin", sysctl)
register("swapon", "sbin", swapon)
register("swapoff", "sbin", swapoff)
on_host_event(host_event)
