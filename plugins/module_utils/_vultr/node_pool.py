# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node-pool planner: desired pool + observed pool -> what to create, PATCH, add and remove.

Why: the rules that make pools converge live here as pure functions, unit-tested table by table:

* Modelplane's autoscaling semantics: giving ``max_nodes`` turns the VKE autoscaler on and
  ``min_nodes`` defaults to ``node_quantity``; while the autoscaler is on, ``node_quantity`` is only
  the initial size (it is the autoscaler's to change), so a re-run does not fight it.
* Node labels and taints are managed *exactly*: PATCH would only add (Vultr's PATCH is additive), so
  the plan lists the ones to add and the ones to delete through the per-pool endpoints.
* A GPU pool (plan ``vcg-*``) gets the taint ``nvidia.com/gpu=true:NoSchedule`` unless taints are given.
* ``plan`` and ``label`` cannot change in place: they are reported as immutable differences.
* ``vpc_only`` (nodes without a public interface) is create-only on VKE and cannot be fixed by a
  replace the user did not ask for: a difference is reported as drift and never applied.
* Ownership is the pool ``tag``: only pools carrying it are changed or deleted.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane import validate

from .plans import is_gpu_plan, parse_plan_id

OWNER_TAG = "metalplane.inference"  # default ``tag`` of pools this collection creates
POOL_LABEL_KEY = "modelplane.ai/pool"  # node label Modelplane selects pools by
GPU_LABEL_KEY = "modelplane.ai/gpu"  # node label naming the GPU model of a GPU pool
GPU_TAINT = ("nvidia.com/gpu", "true", "NoSchedule")  # keeps non-GPU pods off GPU nodes
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# A VKE label (cluster or pool): the vke_cluster role also uses a cluster's label as a file name, so no '/'.
_LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def is_vke_label(value: str) -> bool:
    """1-63 letters, digits, ``.``, ``_`` or ``-``, starting with a letter or digit."""
    return bool(_LABEL_RE.fullmatch(value))


@dataclass(frozen=True, order=True)
class Taint:
    key: str
    value: str
    effect: str

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


@dataclass(frozen=True)
class PoolSpec:
    """A desired node pool, validated and with defaults applied."""

    label: str
    plan: str
    node_quantity: int
    auto_scaler: bool
    min_nodes: int
    max_nodes: int
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    tag: str
    vpc_only: bool | None = None  # None: not sent on create, not compared

    @property
    def is_gpu(self) -> bool:
        return is_gpu_plan(self.plan)

    def create_body(self) -> dict[str, Any]:
        """Body of ``POST .../node-pools`` (also an item of the create-cluster ``node_pools``)."""
        body: dict[str, Any] = {
            "label": self.label,
            "plan": self.plan,
            "node_quantity": self.node_quantity,
            "tag": self.tag,
            "auto_scaler": self.auto_scaler,
        }
        if self.auto_scaler:
            body.update(min_nodes=self.min_nodes, max_nodes=self.max_nodes)
        body["labels"] = dict(self.labels)
        body["taints"] = [t.as_dict() for t in self.taints]
        if self.vpc_only:
            body["vpc_only"] = True
        return body

    def as_dict(self) -> dict[str, Any]:
        return {**self.create_body(), "min_nodes": self.min_nodes, "max_nodes": self.max_nodes}


def default_labels(label: str, plan: str) -> dict[str, str]:
    """``modelplane.ai/pool=<label>``, plus ``modelplane.ai/gpu=<model>`` on GPU pools."""
    labels = {POOL_LABEL_KEY: label}
    if is_gpu_plan(plan):
        parsed = parse_plan_id(plan)
        labels[GPU_LABEL_KEY] = parsed["gpu_model"] if parsed else "true"
    return labels


def default_taints(plan: str) -> tuple[Taint, ...]:
    return (Taint(*GPU_TAINT),) if is_gpu_plan(plan) else ()


def _int(params: dict[str, Any], name: str, prefix: str, minimum: int) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if value < minimum:
        raise InputError(f"{prefix}{name}", f"must be at least {minimum}, got {value}")
    return int(value)


def pool_spec_from_params(
    params: dict[str, Any], *, prefix: str = "", default_tag: str = OWNER_TAG, need_plan: bool = True
) -> PoolSpec:
    """Validate pool options and apply defaults; every error names the option (``prefix`` + name).

    ``need_plan=False`` is for ``state: absent``, where only the label and tag matter.
    """
    label = (params.get("label") or "").strip()
    if not is_vke_label(label):
        raise InputError(f"{prefix}label", f"{label!r} is not a valid pool label (letters, digits, '.', '_', '-')")
    plan = (params.get("plan") or "").strip()
    if not plan and need_plan:
        raise InputError(
            f"{prefix}plan", "is required (a Vultr plan id such as vc2-6c-16gb or vcg-l40s-16c-180g-48vram)"
        )
    quantity, auto, min_nodes, max_nodes = _scaling(params, prefix)
    labels = params.get("labels")
    if labels is None:
        labels = default_labels(label, plan)
    else:  # Vultr hands them to Kubernetes as they are: a node the API server refuses would never join the pool
        labels = {str(k): "" if v is None else str(v) for k, v in labels.items()}
        validate.labels(f"{prefix}labels", labels)
    taints_in = params.get("taints")
    taints = default_taints(plan) if taints_in is None else tuple(parse_taint(t, prefix) for t in taints_in)
    tag = params.get("tag") or default_tag
    vpc_only = params.get("vpc_only")
    return PoolSpec(
        label,
        plan,
        quantity,
        auto,
        min_nodes,
        max_nodes,
        labels,
        tuple(sorted(set(taints))),
        tag,
        None if vpc_only is None else bool(vpc_only),
    )


def _scaling(params: dict[str, Any], prefix: str) -> tuple[int, bool, int, int]:
    """``(node_quantity, auto_scaler, min_nodes, max_nodes)`` with Modelplane's defaults, validated."""
    quantity = _int(params, "node_quantity", prefix, 1)
    min_nodes = _int(params, "min_nodes", prefix, 1)
    max_nodes = _int(params, "max_nodes", prefix, 1)
    auto = params.get("auto_scaler")
    if auto is None:
        auto = max_nodes is not None  # Modelplane: a max turns the autoscaler on
    if auto and max_nodes is None:
        raise InputError(f"{prefix}max_nodes", "is required when auto_scaler is true")
    if not auto and (min_nodes is not None or max_nodes is not None):
        raise InputError(f"{prefix}auto_scaler", "is false, so min_nodes/max_nodes would be ignored; remove them")
    if quantity is None:
        quantity = min_nodes or 1
    if auto:
        if max_nodes is None:  # auto is only true when max_nodes is set
            raise InputError(f"{prefix}max_nodes", "is required when the autoscaler is on")
        if min_nodes is None and quantity > max_nodes:
            raise InputError(f"{prefix}node_quantity", f"({quantity}) is greater than max_nodes ({max_nodes})")
        min_nodes = quantity if min_nodes is None else min_nodes  # Modelplane: min defaults to the count
        if min_nodes > max_nodes:
            raise InputError(f"{prefix}min_nodes", f"({min_nodes}) is greater than max_nodes ({max_nodes})")
        if not min_nodes <= quantity <= max_nodes:
            raise InputError(
                f"{prefix}node_quantity",
                f"({quantity}) must lie between min_nodes ({min_nodes}) and max_nodes ({max_nodes})",
            )
    else:
        min_nodes = max_nodes = quantity
    return quantity, bool(auto), min_nodes, max_nodes


def parse_taint(item: dict[str, Any], prefix: str) -> Taint:
    """One taint of the inventory, checked with Kubernetes' rules (InputError naming ``<prefix>taints``)."""
    effect = item.get("effect") or "NoSchedule"
    if effect not in TAINT_EFFECTS:
        raise InputError(f"{prefix}taints", f"effect {effect!r} must be one of {', '.join(TAINT_EFFECTS)}")
    if not item.get("key"):
        raise InputError(f"{prefix}taints", "every taint needs a key")
    key, value = str(item["key"]), str(item.get("value") or "")
    # A taint's key and value follow the label rules (Kubernetes' ValidateTaint).
    validate.label_key(f"{prefix}taints.{key}", key)
    validate.label_value(f"{prefix}taints.{key}", value)
    return Taint(key, value, effect)


def observed_labels(pool: dict[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in (pool.get("labels") or {}).items()}


def observed_taints(pool: dict[str, Any]) -> set[Taint]:
    return {Taint(str(t.get("key")), str(t.get("value") or ""), str(t.get("effect"))) for t in pool.get("taints") or []}


@dataclass
class PoolPlan:
    """What to do to one pool. ``immutable`` and ``drift`` map a field to ``(observed, desired)``.

    ``immutable`` differences need a replace; ``drift`` ones (create-only, such as ``vpc_only``)
    are only reported: they do not make the plan ``changed``.
    """

    create: bool = False
    patch: dict[str, Any] = field(default_factory=dict)
    add_labels: dict[str, str] = field(default_factory=dict)
    remove_labels: list[str] = field(default_factory=list)
    add_taints: list[Taint] = field(default_factory=list)
    remove_taints: list[Taint] = field(default_factory=list)
    immutable: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    drift: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(
            self.create
            or self.patch
            or self.add_labels
            or self.remove_labels
            or self.add_taints
            or self.remove_taints
            or self.immutable
        )

    def summary(self) -> dict[str, Any]:
        return {
            "create": self.create,
            "patch": dict(self.patch),
            "add_labels": dict(self.add_labels),
            "remove_labels": list(self.remove_labels),
            "add_taints": [t.as_dict() for t in self.add_taints],
            "remove_taints": [t.as_dict() for t in self.remove_taints],
            "immutable": {k: {"observed": o, "desired": d} for k, (o, d) in self.immutable.items()},
            "drift": {k: {"observed": o, "desired": d} for k, (o, d) in self.drift.items()},
        }


def plan_pool(spec: PoolSpec, observed: dict[str, Any] | None, *, check_label: bool = False) -> PoolPlan:
    """Compare ``spec`` with the observed pool (None: it does not exist)."""
    if observed is None:
        return PoolPlan(create=True)
    plan = PoolPlan()
    if observed.get("plan") != spec.plan:
        plan.immutable["plan"] = (observed.get("plan"), spec.plan)
    if check_label and observed.get("label") != spec.label:
        plan.immutable["label"] = (observed.get("label"), spec.label)
    have_vpc_only = observed.get("vpc_only")
    if spec.vpc_only is not None and have_vpc_only is not None and bool(have_vpc_only) != spec.vpc_only:
        plan.drift["vpc_only"] = (bool(have_vpc_only), spec.vpc_only)
    plan.patch = scaling_patch(spec, observed)
    if (observed.get("tag") or "") != spec.tag:
        plan.patch["tag"] = spec.tag
    have_labels = observed_labels(observed)
    plan.add_labels = {k: v for k, v in spec.labels.items() if have_labels.get(k) != v}
    plan.remove_labels = sorted(k for k, v in have_labels.items() if spec.labels.get(k) != v)
    have_taints = observed_taints(observed)
    plan.add_taints = sorted(set(spec.taints) - have_taints)
    plan.remove_taints = sorted(have_taints - set(spec.taints))
    return plan


def scaling_patch(spec: PoolSpec, observed: dict[str, Any]) -> dict[str, Any]:
    """PATCH fields for size and autoscaler (absolute values only, so a replay is harmless)."""
    patch: dict[str, Any] = {}
    have_auto = bool(observed.get("auto_scaler"))
    have_qty = int(observed.get("node_quantity") or 0)
    if spec.auto_scaler:
        if not have_auto:
            patch["auto_scaler"] = True
        if observed.get("min_nodes") != spec.min_nodes or not have_auto:
            patch["min_nodes"] = spec.min_nodes
        if observed.get("max_nodes") != spec.max_nodes or not have_auto:
            patch["max_nodes"] = spec.max_nodes
        if not spec.min_nodes <= have_qty <= spec.max_nodes:  # the autoscaler owns the count inside the bounds
            patch["node_quantity"] = min(max(have_qty, spec.min_nodes), spec.max_nodes)
    else:
        if have_auto:
            patch["auto_scaler"] = False
        if have_qty != spec.node_quantity:
            patch["node_quantity"] = spec.node_quantity
    return patch


def replacement_label(label: str, plan: str) -> str:
    """Label of the pool that replaces ``label`` with ``plan`` (labels are unique per cluster)."""
    return f"{label}-{hashlib.sha256(plan.encode()).hexdigest()[:6]}"


def is_generation_of(candidate: str, label: str) -> bool:
    """``label`` itself or one of its replacements (``<label>-<6 hex>``)."""
    return candidate == label or re.fullmatch(rf"{re.escape(label)}-[0-9a-f]{{6}}", candidate) is not None


def select_pools(
    spec: PoolSpec, pools: Iterable[dict[str, Any]]
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], dict[str, Any] | None]:
    """Find ``(current, stale, foreign)`` among a cluster's pools for ``spec``.

    ``current``: our pool of this logical label with the desired plan, else our pool with the
    exact label, else None. ``stale``: our other generations (left by an interrupted or finished
    replace), deleted once ``current`` is active. ``foreign``: a pool with the exact label that
    does not carry our tag (never changed without ``force``).
    """
    ours = [p for p in pools if is_generation_of(str(p.get("label")), spec.label) and p.get("tag") == spec.tag]
    foreign = next((p for p in pools if p.get("label") == spec.label and p.get("tag") != spec.tag), None)
    current = next((p for p in ours if p.get("plan") == spec.plan), None)
    if current is None:
        current = next((p for p in ours if p.get("label") == spec.label), None) or (ours[0] if ours else None)
    stale = [p for p in ours if current is None or p.get("id") != current.get("id")]
    return current, stale, foreign


def extra_pools(pools: Iterable[dict[str, Any]], listed: Iterable[str], tag: str = OWNER_TAG) -> list[dict[str, Any]]:
    """Pools carrying ``tag`` that no listed label accounts for, in label order.

    A pool is accounted for when it is a listed label or one of its replace generations, or when a
    listed label is one of *its* generations (the pool is that label's base: removing the base label
    would remove the generation too). Other tags, the system pool's included, are never extra.
    """
    names = list(listed)
    extra = [
        pool
        for pool in pools
        if pool.get("tag") == tag
        and not any(
            is_generation_of(str(pool.get("label")), name) or is_generation_of(name, str(pool.get("label")))
            for name in names
        )
    ]
    return sorted(extra, key=lambda pool: str(pool.get("label")))
