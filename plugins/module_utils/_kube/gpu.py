# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU readiness signals of a workload cluster, per node, as pure functions over API objects.

Why: "the cluster only reports Ready once the GPU stack is validated and nvidia.com/gpu is
advertised". Three independent signals exist (NVIDIA gpu-operator
``assets/state-operator-validation/0500_daemonset.yaml``; the NVIDIA DRA driver's
``cmd/gpu-kubelet-plugin/deviceinfo.go``; ``ResourceSlice`` in Kubernetes' ``k8s.io/api/resource/v1``):

- ``operator``: the GPU Operator's ``nvidia-operator-validator`` DaemonSet has at least one desired
  pod and all of them ready (its init containers validate driver, toolkit, CUDA and plugin);
- ``allocatable``: the pool's Nodes advertise ``status.allocatable["nvidia.com/gpu"]`` >= N
  (device-plugin stack only: DRA never fills it);
- ``dra``: ResourceSlices of driver ``gpu.nvidia.com`` publish the expected devices per node, and
  their typed attributes/capacity satisfy an InferenceClass ``devices`` entry, so the class
  Modelplane schedules against tells the truth about the hardware.

The same objects yield a per-node inventory (model, count, memory as the driver reports it,
driver version) from which an InferenceClass ``devices`` entry is generated, because Modelplane
needs the figure the DRA driver reports (L40S ``46068Mi``), not the nominal one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._kube import gfd

CHECKS = ("operator", "allocatable", "dra")
GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_DRA_DRIVER = "gpu.nvidia.com"
# ResourceSlice devices of a GPU driver carry attribute type=gpu; MIG/other devices are skipped.
GPU_DEVICE_TYPE = "gpu"
# Typed attribute fields of resource.k8s.io DeviceAttribute (list forms on newer servers).
ATTRIBUTE_TYPES = ("string", "version", "int", "bool")
LIST_ATTRIBUTE_TYPES = {"strings": "string", "versions": "version", "ints": "int", "bools": "bool"}
# GPU Feature Discovery node labels: the inventory source when there is no DRA driver.
# (product, family and compute capability are turned into DRA attribute values by gfd.py).
LABEL_PRODUCT = gfd.LABEL_PRODUCT
LABEL_COUNT = "nvidia.com/gpu.count"
LABEL_MEMORY_MIB = "nvidia.com/gpu.memory"
LABEL_FAMILY = gfd.LABEL_FAMILY
LABEL_DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
LABEL_DRIVER_PARTS = ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev")
# How many not-ready validator pods to describe in a timeout message.
POD_DIAGNOSTIC_LIMIT = 5

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes quantity ("46068Mi", "32Gi", "1.5k", "1e3", 8) as a Decimal; ValueError if not one."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float | Decimal):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    number, exponent, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation:
        raise ValueError(f"not a quantity: {value!r}") from None
    if exponent:
        return base * (Decimal(10) ** int(exponent[1:]))
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    return base * _DECIMAL[suffix or ""]


def parse_version(value: Any) -> tuple[int, ...]:
    """Semantic version core as a tuple padded to 3 parts ("9.0" == "9.0.0"); ValueError if not one."""
    core = re.split(r"[-+]", str(value).strip().lstrip("v"), maxsplit=1)[0]
    parts = core.split(".")
    if not core or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a version: {value!r}")
    numbers = [int(p) for p in parts]
    return tuple(numbers + [0] * (3 - len(numbers)))


def attribute_value(typed: Any) -> tuple[str, Any] | None:
    """(type, value) of a DeviceAttribute ``{string: ...}`` / ``{version: ...}`` / ...; None if untyped."""
    if not isinstance(typed, Mapping):
        return None
    for kind in ATTRIBUTE_TYPES:
        if kind in typed:
            return kind, typed[kind]
    for plural, kind in LIST_ATTRIBUTE_TYPES.items():
        if plural in typed:
            return kind, list(typed[plural] or [])
    return None


# --- ResourceSlices ------------------------------------------------------------------------------


def slice_devices(slices: Iterable[Mapping[str, Any]], driver: str) -> dict[str, list[dict[str, Any]]]:
    """Devices of ``driver`` per node, from the newest generation of each pool.

    Handles the flat device shape of ``resource.k8s.io/v1``/``v1beta2`` and ``v1beta1``'s
    ``devices[].basic``. Older pool generations are being replaced by the driver and are ignored.
    """
    slices = [s for s in slices if (s.get("spec") or {}).get("driver") == driver]
    newest: dict[str, int] = {}
    for item in slices:
        pool = (item.get("spec") or {}).get("pool") or {}
        name = str(pool.get("name") or "")
        newest[name] = max(newest.get(name, 0), int(pool.get("generation") or 0))
    per_node: dict[str, list[dict[str, Any]]] = {}
    for item in sorted(slices, key=lambda s: str((s.get("metadata") or {}).get("name"))):
        spec = item.get("spec") or {}
        pool = spec.get("pool") or {}
        if int(pool.get("generation") or 0) < newest.get(str(pool.get("name") or ""), 0):
            continue
        node = spec.get("nodeName") or str(pool.get("name") or "")
        for device in spec.get("devices") or []:
            body = device.get("basic") if isinstance(device.get("basic"), Mapping) else device
            per_node.setdefault(node, []).append(
                {
                    "name": device.get("name"),
                    "attributes": _bare_keys(body.get("attributes") or {}, driver),
                    "capacity": _bare_keys(body.get("capacity") or {}, driver),
                }
            )
    return per_node


def _bare_keys(values: Mapping[str, Any], driver: str) -> dict[str, Any]:
    """Attribute names qualified with the driver's own domain become bare (``gpu.nvidia.com/uuid``)."""
    prefix = driver + "/"
    return {(k[len(prefix) :] if k.startswith(prefix) else k): v for k, v in values.items()}


def is_gpu_device(device: Mapping[str, Any]) -> bool:
    """A whole GPU: attribute ``type`` is ``gpu``, or absent (drivers such as dra-example-driver)."""
    typed = attribute_value(device["attributes"].get("type"))
    return typed is None or typed[1] == GPU_DEVICE_TYPE


def capacity_value(device: Mapping[str, Any], name: str) -> str | None:
    cap = device["capacity"].get(name)
    if isinstance(cap, Mapping):
        return None if cap.get("value") is None else str(cap.get("value"))
    return None if cap is None else str(cap)


# --- device_match (an InferenceClass devices entry) ------------------------------------------------


@dataclass(frozen=True)
class DeviceMatch:
    """What a device must offer: typed attributes (equal) and capacities (at least)."""

    attributes: dict[str, tuple[str, Any]] = field(default_factory=dict)
    capacity: dict[str, Decimal] = field(default_factory=dict)
    capacity_text: dict[str, str] = field(default_factory=dict)
    count: int | None = None
    driver: str | None = None


def parse_device_match(entry: Mapping[str, Any] | None, field_name: str = "device_match") -> DeviceMatch | None:
    """Validate an InferenceClass ``devices`` entry (or just its attributes/capacity/count)."""
    if not entry:
        return None
    unknown = set(entry) - {"name", "claim", "driver", "deviceClassName", "count", "attributes", "capacity"}
    if unknown:
        raise InputError(field_name, f"unknown keys {sorted(unknown)}; expected an InferenceClass devices entry")
    attributes: dict[str, tuple[str, Any]] = {}
    for key, typed in (entry.get("attributes") or {}).items():
        if not isinstance(typed, Mapping) or sum(1 for t in ATTRIBUTE_TYPES if t in typed) != 1 or len(typed) != 1:
            raise InputError(
                f"{field_name}.attributes.{key}",
                "must set exactly one of string, version, bool, int (e.g. {string: Hopper})",
            )
        kind, value = next((t, typed[t]) for t in ATTRIBUTE_TYPES if t in typed)
        if kind == "version":
            try:
                parse_version(value)
            except ValueError as exc:
                raise InputError(f"{field_name}.attributes.{key}", str(exc)) from None
        attributes[str(key)] = (kind, value)
    capacity: dict[str, Decimal] = {}
    capacity_text: dict[str, str] = {}
    for key, cap in (entry.get("capacity") or {}).items():
        if not isinstance(cap, Mapping) or "value" not in cap:
            raise InputError(f"{field_name}.capacity.{key}", "must be {value: <quantity>} (e.g. {value: 46068Mi})")
        try:
            capacity[str(key)] = parse_quantity(cap["value"])
        except ValueError as exc:
            raise InputError(f"{field_name}.capacity.{key}", str(exc)) from None
        capacity_text[str(key)] = str(cap["value"])
    count = entry.get("count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise InputError(f"{field_name}.count", f"must be a positive integer, got {count!r}")
    return DeviceMatch(attributes, capacity, capacity_text, count, entry.get("driver"))


def device_mismatches(device: Mapping[str, Any], match: DeviceMatch) -> list[str]:
    """Why ``device`` does not satisfy ``match`` (empty: it does). Capacities are minimums."""
    reasons: list[str] = []
    for key, (kind, wanted) in match.attributes.items():
        found = attribute_value(device["attributes"].get(key))
        if found is None:
            reasons.append(f"attribute {key} missing (wants {kind} {wanted!r})")
            continue
        found_kind, value = found
        if not _attribute_equal(kind, wanted, found_kind, value):
            reasons.append(f"attribute {key} is {value!r}, wants {wanted!r}")
    for key, minimum in match.capacity.items():
        text = capacity_value(device, key)
        if text is None:
            reasons.append(f"capacity {key} missing (wants {match.capacity_text[key]})")
            continue
        try:
            if parse_quantity(text) < minimum:
                reasons.append(f"capacity {key} is {text}, below {match.capacity_text[key]}")
        except ValueError:
            reasons.append(f"capacity {key} is not a quantity: {text!r}")
    return reasons


def _attribute_equal(kind: str, wanted: Any, found_kind: str, value: Any) -> bool:
    values = value if isinstance(value, list) else [value]
    for candidate in values:
        if kind == "version" or found_kind == "version":
            try:
                if parse_version(candidate) == parse_version(wanted):
                    return True
            except ValueError:
                continue
        elif (kind == found_kind and candidate == wanted) or (kind == "string" and str(candidate) == str(wanted)):
            return True
    return False


# --- Nodes, DaemonSet, Pods ----------------------------------------------------------------------


def allocatable_gpus(node: Mapping[str, Any]) -> int:
    raw = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE)
    if raw is None:
        return 0
    try:
        return int(parse_quantity(raw))
    except ValueError:
        return 0


def daemonset_summary(ds: Mapping[str, Any] | None) -> dict[str, Any]:
    """Readiness of a DaemonSet: desired > 0, all ready, and the status is about the current spec."""
    if ds is None:
        return {"found": False, "ready": False}
    status = ds.get("status") or {}
    desired = int(status.get("desiredNumberScheduled") or 0)
    ready_pods = int(status.get("numberReady") or 0)
    generation = (ds.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    current = generation is None or observed is None or int(observed) >= int(generation)
    return {
        "found": True,
        "ready": desired > 0 and ready_pods >= desired and current,
        "desired": desired,
        "ready_pods": ready_pods,
        "available": int(status.get("numberAvailable") or 0),
        "updated": int(status.get("updatedNumberScheduled") or 0),
        "observed_current": current,
    }


def pod_diagnostics(pods: Iterable[Mapping[str, Any]], limit: int = POD_DIAGNOSTIC_LIMIT) -> list[dict[str, Any]]:
    """Not-ready pods with each container's state (init containers first, as they run)."""
    found = []
    for pod in sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name"))):
        status = pod.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        if ready:
            continue
        containers = []
        for init, key in ((True, "initContainerStatuses"), (False, "containerStatuses")):
            for cs in status.get(key) or []:
                state = cs.get("state") or {}
                phase = next(iter(state), "unknown")
                detail = state.get(phase) or {}
                entry = {"name": cs.get("name"), "init": init, "ready": bool(cs.get("ready")), "state": phase}
                for extra in ("reason", "message", "exitCode"):
                    if detail.get(extra) is not None:
                        entry[extra] = detail[extra]
                if cs.get("restartCount"):
                    entry["restarts"] = cs["restartCount"]
                containers.append(entry)
        found.append(
            {
                "name": (pod.get("metadata") or {}).get("name"),
                "node": (pod.get("spec") or {}).get("nodeName"),
                "phase": status.get("phase"),
                "containers": containers,
            }
        )
    return found[:limit]


def describe_pod(pod: Mapping[str, Any]) -> str:
    waiting = [c for c in pod["containers"] if (not c["ready"] and c["state"] != "terminated") or c.get("exitCode")]
    states = ", ".join(
        f"{c['name']}: {c['state']}" + (f" {c['reason']}" if c.get("reason") else "") for c in waiting[:3]
    )
    return f"pod {pod['name']} on {pod.get('node') or '?'} ({pod.get('phase')}; {states or 'no container status'})"


# --- Inventory -----------------------------------------------------------------------------------


def node_inventory(node: Mapping[str, Any], devices: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Model, count, memory, driver version of one node, from DRA devices or else GFD labels.

    ``model`` is what the source calls the GPU (the DRA ``productName``, or GFD's ``NVIDIA-L40S``);
    ``product_name`` is the DRA ``productName`` only, None when GFD's label cannot be turned back into
    it (the reason is then in ``attributes_left_out``, see gfd.py).
    """
    labels = (node.get("metadata") or {}).get("labels") or {}
    inventory: dict[str, Any] = {"allocatable": allocatable_gpus(node)}
    gpus = [d for d in devices or [] if is_gpu_device(d)]
    if gpus:
        first = gpus[0]
        attrs = first["attributes"]

        def text(*names: str) -> Any:
            for name in names:
                typed = attribute_value(attrs.get(name))
                if typed is not None:
                    return typed[1]
            return None

        inventory.update(
            source="dra",
            count=len(gpus),
            model=text("productName", "model"),
            product_name=text("productName"),
            architecture=text("architecture"),
            cuda_compute_capability=text("cudaComputeCapability"),
            driver_version=text("driverVersion"),
            memory=capacity_value(first, "memory"),
            devices=[d["name"] for d in gpus],
        )
        models = {str(attribute_value(d["attributes"].get("productName")) or "") for d in gpus}
        if len(models) > 1:
            inventory["mixed_models"] = True
        return inventory
    driver = labels.get(LABEL_DRIVER_FULL)
    if not driver and all(labels.get(p) for p in LABEL_DRIVER_PARTS):
        driver = ".".join(str(labels[p]) for p in LABEL_DRIVER_PARTS)
    memory = labels.get(LABEL_MEMORY_MIB)
    count = labels.get(LABEL_COUNT)
    derived = gfd.attributes(labels)
    source = "labels" if labels.get(LABEL_PRODUCT) else ("allocatable" if inventory["allocatable"] else "none")
    inventory.update(
        source=source,
        count=int(count) if str(count or "").isdigit() else inventory["allocatable"],
        model=labels.get(LABEL_PRODUCT),
        product_name=derived.product_name,
        architecture=derived.architecture,
        cuda_compute_capability=derived.cuda_compute_capability,
        driver_version=driver,
        memory=f"{memory}Mi" if str(memory or "").isdigit() else None,
    )
    if source == "labels" and derived.left_out:
        inventory["attributes_left_out"] = dict(derived.left_out)
    return inventory


def inference_class_devices(inventory: Mapping[str, Any], driver: str) -> list[dict[str, Any]]:
    """An InferenceClass ``devices`` list describing this node's GPUs ([] when nothing is known)."""
    if not inventory.get("count"):
        return []
    attributes: dict[str, Any] = {}
    if inventory.get("product_name"):
        attributes["productName"] = {"string": str(inventory["product_name"])}
    if inventory.get("architecture"):
        attributes["architecture"] = {"string": str(inventory["architecture"])}
    if inventory.get("cuda_compute_capability"):
        attributes["cudaComputeCapability"] = {"version": str(inventory["cuda_compute_capability"])}
    entry: dict[str, Any] = {
        "name": "gpu",
        "claim": "DRA",
        "driver": driver,
        "deviceClassName": driver,
        "count": int(inventory["count"]),
    }
    if attributes:
        entry["attributes"] = attributes
    if inventory.get("memory"):
        entry["capacity"] = {"memory": {"value": str(inventory["memory"])}}
    return [entry]


# --- The verdict ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuCriteria:
    checks: tuple[str, ...]
    gpus_per_node: int
    dra_driver: str
    validator: str  # "namespace/name", for messages
    device_match: DeviceMatch | None = None


def assess(
    criteria: GpuCriteria,
    *,
    nodes: Iterable[Mapping[str, Any]],
    daemonsets: Iterable[Mapping[str, Any]] = (),
    slices: Iterable[Mapping[str, Any]] = (),
) -> tuple[bool, dict[str, Any]]:
    """(ready, summary): per check, per node what is missing, and the per-node inventory."""
    nodes = sorted(nodes, key=lambda n: str((n.get("metadata") or {}).get("name")))
    devices = slice_devices(slices, criteria.dra_driver)
    problems: list[str] = []
    checks: dict[str, Any] = {}
    per_node: dict[str, dict[str, Any]] = {}
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name"))
        inventory = node_inventory(node, devices.get(name))
        inventory["inference_class_devices"] = inference_class_devices(inventory, criteria.dra_driver)
        per_node[name] = {**inventory, "missing": []}
    if "operator" in criteria.checks:
        ds = next(iter(daemonsets), None)
        summary = daemonset_summary(ds)
        checks["operator"] = summary
        if not summary["found"]:
            problems.append(f"DaemonSet {criteria.validator} not found")
        elif not summary["ready"]:
            problems.append(
                f"DaemonSet {criteria.validator}: {summary['ready_pods']}/{summary['desired']} pods ready"
                + ("" if summary["observed_current"] else " (status not yet observed for the current generation)")
            )
    if ("allocatable" in criteria.checks or "dra" in criteria.checks) and not nodes:
        problems.append("no node matches node_selector")
    if "allocatable" in criteria.checks:
        short = []
        for name, entry in per_node.items():
            if entry["allocatable"] < criteria.gpus_per_node:
                message = f"allocatable {GPU_RESOURCE} {entry['allocatable']} < {criteria.gpus_per_node}"
                entry["missing"].append(message)
                short.append(name)
        checks["allocatable"] = {"ready": bool(nodes) and not short, "nodes": len(per_node), "short": short}
    if "dra" in criteria.checks:
        checks["dra"] = _assess_dra(criteria, per_node, devices)
    for name, entry in per_node.items():
        entry["ready"] = not entry["missing"]
        problems.extend(f"node {name}: {m}" for m in entry["missing"])
    ready = not problems and all(c.get("ready") for c in checks.values())
    return ready, {"ready": ready, "checks": checks, "nodes": per_node, "problems": problems}


def _assess_dra(
    criteria: GpuCriteria, per_node: dict[str, dict[str, Any]], devices: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    match = criteria.device_match
    expected = match.count if match and match.count else criteria.gpus_per_node
    short = []
    for name, entry in per_node.items():
        gpus = [d for d in devices.get(name, []) if is_gpu_device(d)]
        if not gpus:
            entry["missing"].append(f"no ResourceSlice device of driver {criteria.dra_driver}")
            short.append(name)
            continue
        matching = gpus
        if match is not None:
            verdicts = [(d, device_mismatches(d, match)) for d in gpus]
            matching = [d for d, reasons in verdicts if not reasons]
            entry["device_mismatches"] = {d["name"]: reasons for d, reasons in verdicts if reasons}
        entry["matching_devices"] = len(matching)
        if len(matching) < expected:
            message = f"{len(matching)} of {expected} expected {criteria.dra_driver} devices"
            if match is not None:
                message += " match device_match"
                first_bad = next(iter(entry.get("device_mismatches", {}).items()), None)
                if first_bad:
                    message += f" ({first_bad[0]}: {'; '.join(first_bad[1])})"
            entry["missing"].append(message)
            short.append(name)
    return {
        "ready": bool(per_node) and not short,
        "nodes": len(per_node),
        "expected_per_node": expected,
        "short": short,
    }
