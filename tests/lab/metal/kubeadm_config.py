"""Validation of the configuration ``kubeadm init --config`` reads, as kubeadm's strict decoder does.

Why a file of its own: the lab's ``kubeadm`` shim (``lab.metal.kubeadm``) must refuse what the real kubeadm
refuses, or the collection's template could carry a misspelt field that only a real server finds. kubeadm
decodes its documents strictly (an unknown field is an error, not a warning) and checks the Kubernetes
version against its own. The field names below are kubeadm's v1beta4 types, as published in
https://kubernetes.io/docs/reference/config-api/kubeadm-config.v1beta4/ (generated from
kubernetes/kubernetes cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go); the KubeletConfiguration fields are the
subset of kubelet.config.k8s.io/v1beta1 (https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/)
the lab knows, so a field outside it is reported as unknown here even where the real kubelet knows it: extend
the table when the collection starts to set one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

KUBEADM_API = "kubeadm.k8s.io/v1beta4"
KUBELET_API = "kubelet.config.k8s.io/v1beta1"
KUBE_PROXY_API = "kubeproxy.config.k8s.io/v1alpha1"
# v1beta4 was introduced with kubeadm v1.31 (the "v1.31" entry of the v1beta4 changelog); older kubeadm cannot read it.
MIN_VERSION = (1, 31)
# kubeadm's version skew policy: it deploys a control plane of its own minor or one minor older
# (https://kubernetes.io/docs/setup/production-environment/tools/kubeadm/create-cluster-kubeadm/#version-skew-policy).
SUPPORTED_MINOR_SKEW = 1
# The kinds of the other kubeadm commands: read and ignored by init with a warning, as kubeadm does.
OTHER_KUBEADM_KINDS = ("JoinConfiguration", "ResetConfiguration", "UpgradeConfiguration")

# A schema is ANY (a leaf or a free-form map), a dict of known fields, or a one-element list (a list of objects).
ANY: None = None
Schema = dict[str, Any] | list[Any] | None

_ARG: Schema = {"name": ANY, "value": ANY}
_ENV: Schema = {"name": ANY, "value": ANY, "valueFrom": ANY}  # core/v1.EnvVar
_TAINT: Schema = {"key": ANY, "value": ANY, "effect": ANY, "timeAdded": ANY}  # core/v1.Taint
_HOST_PATH_MOUNT: Schema = {"name": ANY, "hostPath": ANY, "mountPath": ANY, "readOnly": ANY, "pathType": ANY}
_COMPONENT: dict[str, Any] = {"extraArgs": [_ARG], "extraVolumes": [_HOST_PATH_MOUNT], "extraEnvs": [_ENV]}
_IMAGE_META: dict[str, Any] = {"imageRepository": ANY, "imageTag": ANY}
_TIMEOUTS: Schema = dict.fromkeys(
    (
        "controlPlaneComponentHealthCheck",
        "kubeletHealthCheck",
        "kubernetesAPICall",
        "etcdAPICall",
        "tlsBootstrap",
        "discovery",
        "upgradeManifests",
    ),
    ANY,
)
_NODE_REGISTRATION: Schema = {
    "name": ANY,
    "criSocket": ANY,
    "taints": [_TAINT],
    "kubeletExtraArgs": [_ARG],
    "ignorePreflightErrors": ANY,
    "imagePullPolicy": ANY,
    "imagePullSerial": ANY,
}
_BOOTSTRAP_TOKEN: Schema = dict.fromkeys(("token", "description", "ttl", "expires", "usages", "groups"), ANY)
INIT_CONFIGURATION: Schema = {
    "apiVersion": ANY,
    "kind": ANY,
    "bootstrapTokens": [_BOOTSTRAP_TOKEN],
    "dryRun": ANY,
    "nodeRegistration": _NODE_REGISTRATION,
    "localAPIEndpoint": {"advertiseAddress": ANY, "bindPort": ANY},
    "certificateKey": ANY,
    "skipPhases": ANY,
    "patches": {"directory": ANY},
    "timeouts": _TIMEOUTS,
}
CLUSTER_CONFIGURATION: Schema = {
    "apiVersion": ANY,
    "kind": ANY,
    "etcd": {
        "local": {
            **_IMAGE_META,
            "dataDir": ANY,
            "extraArgs": [_ARG],
            "extraEnvs": [_ENV],
            "serverCertSANs": ANY,
            "peerCertSANs": ANY,
        },
        "external": {
            "endpoints": ANY,
            "caFile": ANY,
            "certFile": ANY,
            "keyFile": ANY,
            "httpEndpoints": ANY,  # v1.35
        },
    },
    "networking": {"serviceSubnet": ANY, "podSubnet": ANY, "dnsDomain": ANY},
    "kubernetesVersion": ANY,
    "controlPlaneEndpoint": ANY,
    "apiServer": {**_COMPONENT, "certSANs": ANY},
    "controllerManager": dict(_COMPONENT),
    "scheduler": dict(_COMPONENT),
    "dns": {**_IMAGE_META, "disabled": ANY},
    "proxy": {"disabled": ANY},
    "certificatesDir": ANY,
    "imageRepository": ANY,
    "featureGates": ANY,
    "clusterName": ANY,
    "encryptionAlgorithm": ANY,
    "certificateValidityPeriod": ANY,
    "caCertificateValidityPeriod": ANY,
}
KUBELET_CONFIGURATION: Schema = dict.fromkeys(
    (
        "apiVersion",
        "kind",
        "address",
        "port",
        "readOnlyPort",
        "authentication",
        "authorization",
        "cgroupDriver",
        "cgroupsPerQOS",
        "clusterDNS",
        "clusterDomain",
        "containerLogMaxFiles",
        "containerLogMaxSize",
        "containerRuntimeEndpoint",
        "cpuManagerPolicy",
        "enableServer",
        "evictionHard",
        "failSwapOn",
        "featureGates",
        "healthzBindAddress",
        "healthzPort",
        "imageGCHighThresholdPercent",
        "imageGCLowThresholdPercent",
        "kubeReserved",
        "logging",
        "maxPods",
        "memorySwap",
        "podPidsLimit",
        "protectKernelDefaults",
        "resolvConf",
        "rotateCertificates",
        "runtimeRequestTimeout",
        "serverTLSBootstrap",
        "shutdownGracePeriod",
        "shutdownGracePeriodCriticalPods",
        "staticPodPath",
        "systemReserved",
        "tlsCipherSuites",
        "tlsMinVersion",
        "topologyManagerPolicy",
        "volumePluginDir",
    ),
    ANY,
)
SCHEMAS: dict[tuple[str, str], Schema] = {
    (KUBEADM_API, "InitConfiguration"): INIT_CONFIGURATION,
    (KUBEADM_API, "ClusterConfiguration"): CLUSTER_CONFIGURATION,
    (KUBELET_API, "KubeletConfiguration"): KUBELET_CONFIGURATION,
    (KUBE_PROXY_API, "KubeProxyConfiguration"): ANY,  # not decoded by the lab (Cilium replaces kube-proxy)
}
_VERSION = re.compile(r"^v?(?P<major>\d+)\.(?P<minor>\d+)\.(?P<patch>\d+)(?P<pre>[-+].*)?$")


class ConfigError(ValueError):
    """The configuration kubeadm would refuse; the message is what the shim prints."""


@dataclass
class InitSettings:
    """What ``kubeadm init`` acts on, from the validated documents (kubeadm's defaults where unset)."""

    kubernetes_version: str
    bind_port: int = 6443
    advertise_address: str | None = None
    node_name: str | None = None
    taints: list[dict[str, Any]] | None = None  # None: kubeadm's control-plane taint
    pod_subnet: str | None = None
    service_subnet: str = "10.96.0.0/12"
    image_repository: str = "registry.k8s.io"
    cluster_name: str = "kubernetes"
    skip_phases: list[str] = field(default_factory=list)
    ignore_preflight_errors: list[str] = field(default_factory=list)
    kube_proxy: bool = True
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)  # kind -> document
    warnings: list[str] = field(default_factory=list)


def parse_version(text: str) -> tuple[int, int, int]:
    match = _VERSION.match(str(text).strip())
    if match is None:
        raise ConfigError(f'couldn\'t parse Kubernetes version "{text}": a semantic version such as v1.34.2 is needed')
    return int(match["major"]), int(match["minor"]), int(match["patch"])


def unknown_fields(document: Any, schema: Schema, path: str = "") -> list[str]:
    """Dotted paths of the fields of ``document`` that ``schema`` does not know (kubeadm's strict decoding)."""
    if schema is ANY:
        return []
    if isinstance(schema, list):
        if not isinstance(document, list):
            return []
        return [
            bad for index, item in enumerate(document) for bad in unknown_fields(item, schema[0], f"{path}[{index}]")
        ]
    if not isinstance(document, dict):
        return []
    found = []
    for key, value in document.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in schema:
            found.append(where)
        else:
            found.extend(unknown_fields(value, schema[key], where))
    return found


def check_version(version: str, kubeadm_version: str | None) -> None:
    """kubernetesVersion against the v1beta4 minimum and, where known, the installed kubeadm (skew policy)."""
    wanted = parse_version(version)
    if wanted[:2] < MIN_VERSION:
        raise ConfigError(
            f"this version of kubeadm only supports deploying clusters with the control plane version >= "
            f"v{MIN_VERSION[0]}.{MIN_VERSION[1]}.0 with the {KUBEADM_API} API. Current version: {version}"
        )
    if kubeadm_version is None:
        return
    have = parse_version(kubeadm_version)
    if wanted > have:
        raise ConfigError(
            f"the requested control plane version {version} is newer than kubeadm's own version "
            f"v{have[0]}.{have[1]}.{have[2]}: install kubeadm {version.lstrip('v')} (kubelet and kubectl alike)"
        )
    if wanted[0] != have[0] or have[1] - wanted[1] > SUPPORTED_MINOR_SKEW:
        raise ConfigError(
            f"kubeadm v{have[0]}.{have[1]}.{have[2]} deploys control planes of v{have[0]}.{have[1]} or "
            f"v{have[0]}.{have[1] - SUPPORTED_MINOR_SKEW} only; requested: {version}"
        )


def validate(text: str, kubeadm_version: str | None = None) -> InitSettings:
    """The settings of a ``kubeadm init --config`` file, or ConfigError with kubeadm's complaint."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ConfigError(f"error converting YAML to JSON: {exc}") from exc
    by_kind: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    for index, document in enumerate(documents):
        if not isinstance(document, dict):
            raise ConfigError(f"document {index + 1} is not a mapping")
        api_version, kind = document.get("apiVersion"), document.get("kind")
        if not api_version or not kind:
            raise ConfigError(f"document {index + 1}: Object 'Kind' or 'apiVersion' is missing")
        if str(api_version).startswith("kubeadm.k8s.io/") and api_version != KUBEADM_API:
            raise ConfigError(
                f'your configuration file uses an API spec the lab does not accept: "{api_version}" (kind {kind}); '
                f"the collection renders {KUBEADM_API} (kubeadm >= v1.31). Run 'kubeadm config migrate "
                "--old-config old.yaml --new-config new.yaml' to convert it"
            )
        if api_version == KUBEADM_API and kind in OTHER_KUBEADM_KINDS:
            warnings.append(
                f"[config] WARNING: Ignored configuration document with GroupVersionKind {api_version}, Kind={kind}"
            )
            continue
        if (api_version, kind) not in SCHEMAS:
            raise ConfigError(f'no kind "{kind}" is registered for version "{api_version}"')
        if kind in by_kind:
            raise ConfigError(f"found multiple documents of kind {kind}")
        unknown = unknown_fields(document, SCHEMAS[(api_version, kind)])
        if unknown:
            fields = ", ".join(f'unknown field "{name}"' for name in unknown)
            raise ConfigError(
                f'error unmarshaling configuration schema.GroupVersionKind{{Group:"{api_version.split("/")[0]}", '
                f'Version:"{api_version.split("/")[1]}", Kind:"{kind}"}}: strict decoding error: {fields}'
            )
        by_kind[str(kind)] = document
    init, cluster = by_kind.get("InitConfiguration", {}), by_kind.get("ClusterConfiguration", {})
    if not init and not cluster:
        raise ConfigError("no InitConfiguration or ClusterConfiguration kind was found in the YAML file")
    version = cluster.get("kubernetesVersion")
    if not version:
        # kubeadm would fetch "stable-1" from dl.k8s.io, which a cut-off site cannot reach: the lab demands a pin.
        raise ConfigError("ClusterConfiguration.kubernetesVersion is unset: kubeadm would look up dl.k8s.io/release")
    check_version(str(version), kubeadm_version)
    registration = init.get("nodeRegistration") or {}
    endpoint = init.get("localAPIEndpoint") or {}
    networking = cluster.get("networking") or {}
    skip = [str(p) for p in init.get("skipPhases") or []]
    port = endpoint.get("bindPort", 6443)
    if not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigError(f"localAPIEndpoint.bindPort: Invalid value: {port!r}: must be a valid port number")
    return InitSettings(
        kubernetes_version=str(version),
        bind_port=port,
        advertise_address=endpoint.get("advertiseAddress"),
        node_name=registration.get("name"),
        taints=registration.get("taints"),
        pod_subnet=networking.get("podSubnet"),
        service_subnet=networking.get("serviceSubnet") or "10.96.0.0/12",
        image_repository=cluster.get("imageRepository") or "registry.k8s.io",
        cluster_name=cluster.get("clusterName") or "kubernetes",
        skip_phases=skip,
        ignore_preflight_errors=[str(e) for e in registration.get("ignorePreflightErrors") or []],
        kube_proxy=not (
            (cluster.get("proxy") or {}).get("disabled") or any(p in skip for p in ("addon", "addon/kube-proxy"))
        ),
        documents=by_kind,
        warnings=warnings,
    )
