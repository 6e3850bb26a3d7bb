# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The serving engine a smoke test runs, per GPU generation: an image and arguments that GPU supports.

Why a table: the default engine must start on the GPU it lands on, and two facts make one image and
one set of flags wrong for some GPUs:

- **bfloat16 needs compute capability 8.0** (Ampere). vLLM's default ``--dtype auto`` takes the
  model's own dtype, which for current models is bfloat16, and refuses on Volta (7.0) and Turing
  (7.5): "Bfloat16 is only supported on GPUs with compute capability of at least 8.0 ... use
  float16 instead ... --dtype=half" (https://github.com/vllm-project/vllm/issues/946, the same error
  in #1157 for a T4). So pre-Ampere GPUs get ``--dtype=half``.
- **vLLM's minimum compute capability moved from 7.0 to 7.5.** The GPU installation page of v0.14.0
  lists "compute capability 7.0 or higher (e.g., V100, T4, ...)"
  (https://docs.vllm.ai/en/v0.14.0/getting_started/installation/gpu/), while the current page asks for
  7.5 (https://docs.vllm.ai/en/latest/getting_started/installation/gpu/). FP16 on pre-Ampere GPUs
  works in the V1 engine since v0.10.2 (https://github.com/vllm-project/vllm/pull/24022). So Volta
  gets the ``v0.14.0`` image, the newest whose documentation still names V100; every later GPU gets
  the image Modelplane's own examples use (``v0.23.0``, ``docs/manifests/concepts/model-deployment.yaml``
  at v0.3.1).

Below 7.0 (Pascal and older) vLLM ships no kernels: the smoke test refuses with the reason unless the
user names an image. The compute capability comes from the InferenceClass's
``cudaComputeCapability`` attribute, else from its ``architecture``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

# vLLM's OpenAI-compatible server image (its entrypoint serves /v1/chat/completions on port 8000,
# the port Modelplane's composition wires).
MODERN_IMAGE = "vllm/vllm-openai:v0.23.0"
VOLTA_IMAGE = "vllm/vllm-openai:v0.14.0"
HALF = "--dtype=half"
# A smoke test answers one short prompt: a short context keeps the KV cache within a 16 GB GPU.
SMOKE_ARGS = ("--max-model-len=4096",)


@dataclass(frozen=True)
class EngineProfile:
    """The engine for GPUs of compute capability ``min_cc`` and up (to the next profile)."""

    generation: str
    min_cc: tuple[int, int]
    image: str
    args: tuple[str, ...]
    why: str


# Newest first: the first profile whose min_cc the GPU reaches is its profile.
PROFILES: tuple[EngineProfile, ...] = (
    EngineProfile(
        "Ampere and later (A16, A40, A100, L40S, H100, H200, B200)",
        (8, 0),
        MODERN_IMAGE,
        (),
        "bfloat16-capable: --dtype auto keeps the model's own dtype",
    ),
    EngineProfile(
        "Turing (T4)",
        (7, 5),
        MODERN_IMAGE,
        (HALF,),
        "no bfloat16 before compute capability 8.0: float16",
    ),
    EngineProfile(
        "Volta (V100)",
        (7, 0),
        VOLTA_IMAGE,
        (HALF,),
        "no bfloat16 before 8.0: float16; vLLM images after v0.14.0 document 7.5 as their minimum",
    ),
)
# Compute capability of each architecture name the NVIDIA DRA driver publishes (its lowest member).
ARCHITECTURE_CC = {
    "Kepler": (3, 0),
    "Maxwell": (5, 0),
    "Pascal": (6, 0),
    "Volta": (7, 0),
    "Turing": (7, 5),
    "Ampere": (8, 0),
    "Ada Lovelace": (8, 9),
    "Hopper": (9, 0),
    "Blackwell": (10, 0),
}


def compute_capability(device: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """The GPU's compute capability from a class device's attributes (``cudaComputeCapability``, else
    ``architecture``); None when the class says neither."""
    attributes = (device or {}).get("attributes") or {}
    version = (attributes.get("cudaComputeCapability") or {}).get("version")
    if isinstance(version, str):
        parts = version.split(".")
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            return int(parts[0]), int(parts[1])
    architecture = (attributes.get("architecture") or {}).get("string")
    return ARCHITECTURE_CC.get(architecture) if isinstance(architecture, str) else None


def profile_for(cc: tuple[int, int] | None) -> EngineProfile | None:
    """The profile of a GPU (the newest one without a known compute capability); None below 7.0."""
    if cc is None:
        return PROFILES[0]
    return next((p for p in PROFILES if cc >= p.min_cc), None)


def engine_for(
    device: Mapping[str, Any] | None,
    *,
    model: str,
    served_model_name: str,
    gpus: int,
    image: str | None,
    extra_args: list[str] | tuple[str, ...] = (),
    cached: bool = False,
) -> dict[str, Any]:
    """Image, arguments and the reason, for the GPU the class describes.

    ``cached``: the model comes from a ModelCache mounted at ``/mnt/models``, and Modelplane passes
    ``--model`` itself when the member brings no ``command`` (the XRD's multi-node example: "When a
    member brings its own command, Modelplane does not inject --model"), so it is not passed here.
    """
    cc = compute_capability(device)
    cc_text = f"{cc[0]}.{cc[1]}" if cc else None
    profile = profile_for(cc)
    if profile is None and not image:
        raise InputError(
            "image",
            f"the pool's GPUs have compute capability {cc_text} (below 7.0, Pascal or older), for which vLLM "
            "ships no kernels: name an engine image that supports them, or choose a pool of newer GPUs",
        )
    args = [] if cached else [f"--model={model}"]
    args.append(f"--served-model-name={served_model_name}")
    if profile is not None:
        args.extend(profile.args)
    args.extend(SMOKE_ARGS)
    if gpus > 1:
        args.append(f"--tensor-parallel-size={gpus}")
    args.extend(str(a) for a in extra_args)
    return {
        "image": image or (profile.image if profile else ""),
        "args": args,
        "generation": profile.generation if profile else "unsupported (image given)",
        "compute_capability": cc_text,
        "why": profile.why if profile else "image given by the user",
    }
