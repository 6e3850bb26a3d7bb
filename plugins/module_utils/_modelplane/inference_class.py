# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""InferenceClass objects: given as a spec, or generated from the GPUs the nodes report.

Why: the class is what Modelplane's scheduler matches a ModelDeployment against, and what the DRA
ResourceClaim asks for, so it must describe the hardware exactly as the NVIDIA DRA driver publishes
it: driver and DeviceClass ``gpu.nvidia.com``, the per-node GPU count, the ``productName`` /
``architecture`` / ``cudaComputeCapability`` attributes and the ``memory`` capacity the driver
reports (L40S ``46068Mi``, not the nominal 48Gi: a selector ``>= 48Gi`` would never bind).
Generating the class from ``gpu_ready``'s inventory removes the transcription step where that goes
wrong.

Left out on purpose: ``driverVersion`` (a driver upgrade would make the class lie until it is
regenerated) and node names (replacing a node must not change the class).

The CEL rules of the XRD (exactly one typed attribute field, ``deviceClassName`` when
``claim: DRA``, the provisioning block matching the provider) only run on a real API server; they
are checked here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._kube import gfd
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import validate
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.constants import (
    API_VERSION,
    GPU_DEVICE_NAME,
    KIND_INFERENCE_CLASS,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    MAX_ATTRIBUTES,
    MAX_CAPACITIES,
    MAX_DEVICE_COUNT,
    MAX_DEVICES,
    NVIDIA_DRA_DRIVER,
)

SPEC_KEYS = ("description", "provisioning", "devices")
DEVICE_KEYS = ("name", "claim", "driver", "deviceClassName", "count", "attributes", "capacity")
CLAIMS = ("DRA", "Synthetic")
ATTRIBUTE_TYPES = ("string", "version", "bool", "int")
# provisioning.provider -> (its block, the block's required string fields besides accelerator,
# its optional fields). diskSizeGb >= 10 everywhere it exists.
PROVIDERS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "GKE": ("gke", ("machineType",), ("diskSizeGb",)),
    "EKS": ("eks", ("instanceType",), ("diskSizeGb",)),
    "AKS": ("aks", ("vmSize",), ("diskSizeGb",)),
    "Nebius": ("nebius", ("platform", "preset"), ("diskSizeGb", "driversPreset")),
    "Vultr": ("vultr", ("plan",), ()),
}
# Provider fields the XRD caps at 63 characters (the others only need to be non-empty).
_SHORT_FIELDS = ("plan", "platform", "preset", "driversPreset")
MIN_DISK_GB = 10
MAX_ACCELERATORS = 16
SHORT_MAX = 63
LONG_MAX = 253
# gpu_ready marks an inventory read from GPU Feature Discovery labels with source=labels: its ``model``
# is GFD's label ("NVIDIA-L40S", '-' for ' '), not the DRA driver's productName; gfd.py turns it back
# where that is certain (gpu_ready already did, as ``product_name``).
_GFD_SOURCE = "labels"


def _product(entry: Mapping[str, Any]) -> str | None:
    """The DRA productName of an inventory entry, None when unknown or not certain.

    ``product`` (given by hand) wins; then gpu_ready's ``product_name`` (None included: it said the
    label cannot be reversed); then ``model``, reversed by gfd.py's rules when it is a GFD label.
    """
    if entry.get("product"):
        return str(entry["product"])
    if "product_name" in entry:
        return None if not entry["product_name"] else str(entry["product_name"])
    model = entry.get("model")
    if not model:
        return None
    if entry.get("source") == _GFD_SOURCE:
        return gfd.product_name(model)[0]
    return str(model)


def _attributes(field: str, value: Any) -> dict[str, dict[str, Any]]:
    attrs = validate.mapping(field, value)
    if len(attrs) > MAX_ATTRIBUTES:
        raise InputError(field, f"at most {MAX_ATTRIBUTES} attributes, got {len(attrs)}")
    out: dict[str, dict[str, Any]] = {}
    for key, raw_typed in attrs.items():
        where = f"{field}.{key}"
        validate.string(where, key, max_length=SHORT_MAX)
        typed = validate.mapping(where, raw_typed)
        if len(typed) != 1 or next(iter(typed)) not in ATTRIBUTE_TYPES:
            raise InputError(where, "must set exactly one of string, version, bool, int (e.g. {string: Hopper})")
        kind, raw = next(iter(typed.items()))
        if kind == "string":
            value_out: Any = validate.string(
                f"{where}.string", raw, min_length=0, max_length=validate.ATTRIBUTE_STRING_MAX
            )
        elif kind == "version":
            value_out = validate.semver(f"{where}.version", raw)
        elif kind == "bool":
            if not isinstance(raw, bool):
                raise InputError(f"{where}.bool", f"must be true or false, got {raw!r}")
            value_out = raw
        else:
            value_out = validate.integer(f"{where}.int", raw, minimum=validate.INT64_MIN, maximum=validate.INT64_MAX)
        out[str(key)] = {kind: value_out}
    return out


def _capacity(field: str, value: Any) -> dict[str, dict[str, str]]:
    caps = validate.mapping(field, value)
    if len(caps) > MAX_CAPACITIES:
        raise InputError(field, f"at most {MAX_CAPACITIES} capacities, got {len(caps)}")
    out: dict[str, dict[str, str]] = {}
    for key, raw_cap in caps.items():
        where = f"{field}.{key}"
        validate.string(where, key, max_length=SHORT_MAX)
        cap = validate.mapping(where, raw_cap)
        validate.known_keys(where, cap, ("value",))
        if "value" not in cap:
            raise InputError(f"{where}.value", "is required (e.g. {value: 46068Mi})")
        out[str(key)] = {"value": validate.quantity(f"{where}.value", cap["value"])}
    return out


def device(field: str, value: Any) -> dict[str, Any]:
    """One ``devices`` entry with the XRD defaults made explicit (claim DRA, count 1)."""
    entry = validate.mapping(field, value)
    validate.known_keys(field, entry, DEVICE_KEYS)
    for required in ("name", "driver"):
        if required not in entry:
            raise InputError(f"{field}.{required}", "is required")
    out: dict[str, Any] = {
        "name": validate.string(f"{field}.name", entry["name"], max_length=SHORT_MAX),
        "claim": entry.get("claim", "DRA"),
        "driver": validate.string(f"{field}.driver", entry["driver"], max_length=LONG_MAX),
    }
    if out["claim"] not in CLAIMS:
        raise InputError(f"{field}.claim", f"must be one of {list(CLAIMS)}, got {out['claim']!r}")
    if "deviceClassName" in entry:
        out["deviceClassName"] = validate.string(
            f"{field}.deviceClassName", entry["deviceClassName"], max_length=LONG_MAX
        )
    elif out["claim"] == "DRA":
        raise InputError(f"{field}.deviceClassName", "is required when claim is DRA (e.g. gpu.nvidia.com)")
    out["count"] = validate.integer(f"{field}.count", entry.get("count", 1), minimum=1, maximum=MAX_DEVICE_COUNT)
    if entry.get("attributes"):
        out["attributes"] = _attributes(f"{field}.attributes", entry["attributes"])
    if entry.get("capacity"):
        out["capacity"] = _capacity(f"{field}.capacity", entry["capacity"])
    return out


def devices(field: str, value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise InputError(field, "must be a non-empty list of devices")
    if len(value) > MAX_DEVICES:
        raise InputError(field, f"at most {MAX_DEVICES} devices, got {len(value)}")
    out = [device(f"{field}[{i}]", item) for i, item in enumerate(value)]
    names = [d["name"] for d in out]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InputError(field, f"device names must be unique, repeated: {duplicates}")
    return out


def _accelerator(field: str, value: Any) -> dict[str, Any]:
    acc = validate.mapping(field, value)
    validate.known_keys(field, acc, ("type", "count"))
    for required in ("type", "count"):
        if required not in acc:
            raise InputError(f"{field}.{required}", "is required")
    return {
        "type": validate.string(f"{field}.type", acc["type"], max_length=SHORT_MAX),
        "count": validate.integer(f"{field}.count", acc["count"], minimum=1, maximum=MAX_ACCELERATORS),
    }


def provisioning(field: str, value: Any) -> dict[str, Any]:
    """``spec.provisioning``: only for classes Modelplane itself provisions; ignored for Existing."""
    prov = validate.mapping(field, value)
    provider = prov.get("provider")
    if provider not in PROVIDERS:
        raise InputError(f"{field}.provider", f"must be one of {list(PROVIDERS)}, got {provider!r}")
    block_name, required, optional = PROVIDERS[provider]
    validate.known_keys(field, prov, ("provider", block_name))
    if block_name not in prov:
        raise InputError(f"{field}.{block_name}", f"is required when provider is {provider}")
    where = f"{field}.{block_name}"
    block = validate.mapping(where, prov[block_name])
    validate.known_keys(where, block, (*required, *optional, "accelerator"))
    out: dict[str, Any] = {}
    for key in required:
        if key not in block:
            raise InputError(f"{where}.{key}", "is required")
    for key in (*required, *optional):
        if key not in block:
            continue
        if key == "diskSizeGb":
            out[key] = validate.integer(f"{where}.{key}", block[key], minimum=MIN_DISK_GB)
        else:
            limit = SHORT_MAX if key in _SHORT_FIELDS else None
            out[key] = validate.string(f"{where}.{key}", block[key], max_length=limit)
    if "accelerator" not in block:
        raise InputError(f"{where}.accelerator", "is required")
    out["accelerator"] = _accelerator(f"{where}.accelerator", block["accelerator"])
    return {"provider": provider, block_name: out}


def class_spec(value: Any, field: str = "spec") -> dict[str, Any]:
    """A given InferenceClass ``spec``, checked and with defaults made explicit."""
    spec = validate.mapping(field, value)
    validate.known_keys(field, spec, SPEC_KEYS)
    if "devices" not in spec:
        raise InputError(f"{field}.devices", "is required")
    out: dict[str, Any] = {}
    if spec.get("description") is not None:
        out["description"] = validate.string(f"{field}.description", spec["description"], min_length=0)
    if spec.get("provisioning") is not None:
        out["provisioning"] = provisioning(f"{field}.provisioning", spec["provisioning"])
    out["devices"] = devices(f"{field}.devices", spec["devices"])
    return out


def inference_class(name: str, spec: Mapping[str, Any], *, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The cluster-scoped ``InferenceClass`` object for a given spec."""
    validate.dns_subdomain("name", name)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND_INFERENCE_CLASS,
        "metadata": {"name": name, "labels": {**validate.labels("labels", labels), MANAGED_BY_LABEL: MANAGED_BY_VALUE}},
        "spec": class_spec(spec),
    }


# --- generated from a GPU inventory ----------------------------------------------------------------


def inventory_entries(inventory: Any, field: str = "inventory") -> list[tuple[str, Mapping[str, Any]]]:
    """(node, entry) pairs from a list of ``{node, ...}`` or gpu_ready's ``nodes`` mapping."""
    if isinstance(inventory, Mapping):
        pairs = [(str(node), entry) for node, entry in inventory.items()]
    elif isinstance(inventory, list):
        pairs = []
        for i, raw in enumerate(inventory):
            entry = validate.mapping(f"{field}[{i}]", raw)
            pairs.append((validate.string(f"{field}[{i}].node", entry.get("node")), entry))
    else:
        raise InputError(field, "must be a list of per-node entries or gpu_ready's nodes mapping")
    if not pairs:
        raise InputError(field, "is empty: no node reported GPUs (run gpu_ready against the pool first)")
    for node, entry in pairs:
        validate.mapping(f"{field}.{node}", entry)
    return sorted(pairs)


def _shape(field: str, node: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    where = f"{field}.{node}"
    count = entry.get("count")
    if not count:
        raise InputError(f"{where}.count", "no GPUs reported on this node (is the GPU stack ready?)")
    memory = entry.get("memory")
    if not memory:
        raise InputError(
            f"{where}.memory",
            "unknown: the class needs the memory the DRA driver reports (run gpu_ready with checks [dra], "
            "or give the class explicitly)",
        )
    return {
        "count": validate.integer(f"{where}.count", count, minimum=1, maximum=MAX_DEVICE_COUNT),
        "product": _product(entry),
        "architecture": None if entry.get("architecture") is None else str(entry["architecture"]),
        "cuda_compute_capability": (
            None
            if entry.get("cuda_compute_capability") is None
            else validate.semver(f"{where}.cuda_compute_capability", entry["cuda_compute_capability"])
        ),
        "memory": validate.quantity(f"{where}.memory", memory),
    }


def devices_from_inventory(
    inventory: Any,
    *,
    driver: str = NVIDIA_DRA_DRIVER,
    device_class_name: str | None = None,
    field: str = "inventory",
) -> list[dict[str, Any]]:
    """The ``devices`` list of a pool whose nodes all report the same GPUs (a pool is homogeneous)."""
    shapes = [(node, _shape(field, node, entry)) for node, entry in inventory_entries(inventory, field)]
    first_node, first = shapes[0]
    for node, shape in shapes[1:]:
        differs = [key for key in first if shape[key] != first[key]]
        if differs:
            detail = ", ".join(f"{key} {first[key]!r} on {first_node} vs {shape[key]!r} on {node}" for key in differs)
            raise InputError(field, f"nodes of one pool must have the same GPUs; {detail}")
    attributes: dict[str, dict[str, Any]] = {}
    if first["product"]:
        attributes["productName"] = {"string": first["product"]}
    if first["architecture"]:
        attributes["architecture"] = {"string": first["architecture"]}
    if first["cuda_compute_capability"]:
        attributes["cudaComputeCapability"] = {"version": first["cuda_compute_capability"]}
    entry: dict[str, Any] = {
        "name": GPU_DEVICE_NAME,
        "claim": "DRA",
        "driver": driver,
        "deviceClassName": device_class_name or driver,
        "count": first["count"],
        "capacity": {"memory": {"value": first["memory"]}},
    }
    if attributes:
        entry["attributes"] = attributes
    return devices("devices", [entry])


def inference_class_from_inventory(
    name: str,
    inventory: Any,
    *,
    description: str | None = None,
    provisioning: Mapping[str, Any] | None = None,
    driver: str = NVIDIA_DRA_DRIVER,
    device_class_name: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An ``InferenceClass`` describing the GPUs ``gpu_ready`` found on a pool's nodes."""
    found = devices_from_inventory(inventory, driver=driver, device_class_name=device_class_name)
    gpu = found[0]
    if description is None:
        product = (gpu.get("attributes") or {}).get("productName", {}).get("string") or "GPU"
        description = f"{gpu['count']}x {product} ({gpu['capacity']['memory']['value']}), from the nodes' GPU inventory"
    spec: dict[str, Any] = {"description": description, "devices": found}
    if provisioning is not None:
        spec["provisioning"] = provisioning
    return inference_class(name, spec, labels=labels)
