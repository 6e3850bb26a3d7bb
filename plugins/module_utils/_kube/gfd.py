# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU Feature Discovery node labels translated into the NVIDIA DRA driver's device attributes.

Why: a cluster whose GPUs are advertised by the device plugin (no DRA driver yet, so no
ResourceSlice to read) still describes its GPUs through GFD labels. Modelplane schedules against
the attributes the DRA driver will publish once its serving stack is installed, so an InferenceClass
generated from labels must carry exactly those values, or none at all: a class attribute that does
not equal the device's never binds.

The rules (NVIDIA k8s-device-plugin ``internal/lm/resource.go`` for the labels, the NVIDIA DRA driver's
``cmd/gpu-kubelet-plugin/deviceinfo.go`` for the attributes):

``cudaComputeCapability``
    ``nvidia.com/gpu.compute.major`` / ``.minor`` are NVML's numbers; the driver publishes the same
    pair as a semantic version (``8`` / ``9`` -> ``8.9.0``). Both labels must be non-negative integers.

``architecture``
    ``nvidia.com/gpu.family`` is GFD's own word for the compute capability (``ada-lovelace``); the
    driver publishes go-nvlib's name (``Ada Lovelace``), see ``FAMILY_ARCHITECTURES``. GFD releases
    before Ada and Blackwell label every 8.x GPU ``ampere`` and 10.x/12.x ``undefined``, so the
    compute capability, when present, decides: a family label ``ampere`` on an 8.9 GPU is such a
    release and the GPU is Ada Lovelace. Any other disagreement between the two labels, a family
    ``ampere`` without compute labels (it may be an Ada GPU), or a family with no DRA name
    (``tesla``, ``fermi``, ``undefined``) leaves the attribute out.

``productName``
    GFD writes NVML's device name with runs of spaces turned into one ``-`` (and characters other
    than ``[A-Za-z0-9-_. ]`` dropped), then ``-MIG-<profile>`` under the ``single`` MIG strategy
    and ``-SHARED`` when time-slicing replicas are advertised under the same resource name. The
    driver publishes the NVML name itself. The way back is only certain where no ``-`` of the
    label can be a ``-`` of the name:

    1. ``-SHARED`` at the end is dropped (no NVML name ends with a word ``SHARED``);
    2. a label with ``-MIG-`` describes MIG devices, not the whole GPU: left out;
    3. a label in ``KNOWN_PRODUCT_NAMES`` (built by applying GFD's own rule to names NVML is known
       to report) maps to that name, e.g. ``Tesla-V100-SXM2-32GB`` -> ``Tesla V100-SXM2-32GB``;
    4. ``<brand>-<model>`` with one ``-``, a brand NVML names begin with (``NVIDIA``, ``Tesla``,
       ``Quadro``, always followed by a space) and a model of letters and digits only maps to
       ``<brand> <model>`` (``NVIDIA-L40S`` -> ``NVIDIA L40S``);
    5. anything else is ambiguous (``NVIDIA-A16-4Q`` may be ``NVIDIA A16-4Q`` or ``NVIDIA A16 4Q``)
       and is left out rather than guessed.

Every attribute left out is reported with its reason, so a class without it is explained.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_FAMILY = "nvidia.com/gpu.family"
LABEL_COMPUTE_MAJOR = "nvidia.com/gpu.compute.major"
LABEL_COMPUTE_MINOR = "nvidia.com/gpu.compute.minor"

# GFD family label -> the architecture string the NVIDIA DRA driver publishes (go-nvlib names).
# GFD's other values (tesla, fermi: no driver >= 565 supports them; undefined) have no DRA name.
FAMILY_ARCHITECTURES: dict[str, str] = {
    "kepler": "Kepler",
    "maxwell": "Maxwell",
    "pascal": "Pascal",
    "volta": "Volta",
    "turing": "Turing",
    "ampere": "Ampere",
    "ada-lovelace": "Ada Lovelace",
    "hopper": "Hopper",
    "blackwell": "Blackwell",
}
# The family older GFD releases wrote for every GPU of this compute major, Ada Lovelace (8.9) included.
_OLD_GFD_AMPERE = "ampere"
_OLD_GFD_AMPERE_MAJOR = 8

# NVML device names (what nvidia-smi shows and the DRA driver publishes as productName) whose GFD
# label has more than one '-', so rule 4 cannot reverse it. Only names known exactly belong here.
KNOWN_PRODUCT_NAMES: tuple[str, ...] = (
    "Tesla V100-SXM2-16GB",
    "Tesla V100-SXM2-32GB",
    "Tesla V100-PCIE-16GB",
    "Tesla V100-PCIE-32GB",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A100-PCIE-40GB",
    "NVIDIA A100 80GB PCIe",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA H100 PCIe",
    "NVIDIA H100 NVL",
    "NVIDIA RTX A6000",
    "NVIDIA RTX 6000 Ada Generation",
)
# Rule 4: brands NVML names start with, always followed by a space.
_BRANDS = ("NVIDIA", "Tesla", "Quadro")
_MODEL_WORD = re.compile(r"^[A-Za-z0-9]+$")
_SHARED_SUFFIX = "-SHARED"
_MIG_MARK = "-MIG-"
_GFD_DROPPED = re.compile(r"[^A-Za-z0-9\-_. ]")


def gfd_product_label(name: str) -> str:
    """The ``nvidia.com/gpu.product`` GFD writes for an NVML device name (without MIG or sharing)."""
    return "-".join(_GFD_DROPPED.sub("", name).split())


_KNOWN_BY_LABEL: dict[str, str] = {gfd_product_label(name): name for name in KNOWN_PRODUCT_NAMES}


def compute_family(major: int, minor: int) -> str | None:
    """The family GFD (current releases) derives from a compute capability; None when it has none."""
    families = {3: "kepler", 5: "maxwell", 6: "pascal", 9: "hopper", 10: "blackwell", 12: "blackwell"}
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ampere" if minor < 9 else "ada-lovelace"
    return families.get(major)


@dataclass(frozen=True)
class GfdAttributes:
    """DRA attribute values derived from GFD labels, and why each missing one was left out."""

    product_name: str | None = None
    architecture: str | None = None
    cuda_compute_capability: str | None = None
    left_out: dict[str, str] = field(default_factory=dict)


def _compute(labels: Mapping[str, Any]) -> tuple[int, int] | None:
    major, minor = str(labels.get(LABEL_COMPUTE_MAJOR, "")), str(labels.get(LABEL_COMPUTE_MINOR, ""))
    if major.isdigit() and minor.isdigit():
        return int(major), int(minor)
    return None


def product_name(label: Any) -> tuple[str | None, str | None]:
    """(productName, None) from a GFD product label, or (None, why it cannot be known)."""
    if not label:
        return None, f"no {LABEL_PRODUCT} label"
    text = str(label)
    if text.endswith(_SHARED_SUFFIX):
        text = text[: -len(_SHARED_SUFFIX)]
    if _MIG_MARK in text:
        return None, f"{LABEL_PRODUCT} {label!r} names MIG devices (MIG strategy single), not the whole GPU"
    if text in _KNOWN_BY_LABEL:
        return _KNOWN_BY_LABEL[text], None
    brand, dash, model = text.partition("-")
    if dash and brand in _BRANDS and _MODEL_WORD.match(model):
        return f"{brand} {model}", None
    return None, (
        f"{LABEL_PRODUCT} {label!r} cannot be turned back into the NVML name: GFD wrote each space as '-', "
        "and this label's '-' may be the name's own (not a known product)"
    )


def _architecture_of_family(family: str | None) -> tuple[str | None, str | None]:
    """Without compute capability labels: the family label alone, where it is unambiguous."""
    if family is None:
        return None, f"no {LABEL_FAMILY} or compute capability labels"
    if family not in FAMILY_ARCHITECTURES:
        return None, f"{LABEL_FAMILY} {family!r} has no DRA architecture name"
    if family == _OLD_GFD_AMPERE:
        return None, (
            f"{LABEL_FAMILY} {family!r} without compute capability labels: GFD releases before Ada label "
            "Ada Lovelace GPUs ampere too"
        )
    return FAMILY_ARCHITECTURES[family], None


def architecture(labels: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(architecture, None) from the family and compute labels, or (None, why it cannot be known)."""
    family = str(labels.get(LABEL_FAMILY) or "") or None
    compute = _compute(labels)
    if compute is None:
        return _architecture_of_family(family)
    major, minor = compute
    from_compute = compute_family(major, minor)
    if from_compute is None:
        return None, f"compute capability {major}.{minor} has no known architecture"
    # No family, the same one, one without a DRA name (an older GFD's "undefined" for Blackwell), or an
    # older GFD's "ampere" for an 8.x GPU: the compute capability decides.
    if (
        family is None
        or family == from_compute
        or family not in FAMILY_ARCHITECTURES
        or (family == _OLD_GFD_AMPERE and major == _OLD_GFD_AMPERE_MAJOR)
    ):
        return FAMILY_ARCHITECTURES[from_compute], None
    return None, f"{LABEL_FAMILY} {family!r} contradicts compute capability {major}.{minor} ({from_compute})"


def cuda_compute_capability(labels: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """("8.9.0", None) from the compute labels, or (None, why not)."""
    compute = _compute(labels)
    if compute is None:
        return None, f"no integer {LABEL_COMPUTE_MAJOR} / {LABEL_COMPUTE_MINOR} labels"
    return f"{compute[0]}.{compute[1]}.0", None


def attributes(labels: Mapping[str, Any]) -> GfdAttributes:
    """productName, architecture and cudaComputeCapability as the DRA driver would publish them."""
    found: dict[str, str | None] = {}
    left_out: dict[str, str] = {}
    for key, (value, reason) in (
        ("productName", product_name(labels.get(LABEL_PRODUCT))),
        ("architecture", architecture(labels)),
        ("cudaComputeCapability", cuda_compute_capability(labels)),
    ):
        found[key] = value
        if reason is not None:
            left_out[key] = reason
    return GfdAttributes(found["productName"], found["architecture"], found["cudaComputeCapability"], left_out)
