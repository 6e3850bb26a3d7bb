"""What the ``modelplane_adopt`` role inventories before adopting: the decisions it used to take in Jinja.

Table-driven: which classes are generated (the module's rule: a pool's class defaults to its name, a
given class wins), which pools ``gpu_ready`` must inventory for them, and whether a dry run can plan them.
"""

from __future__ import annotations

from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.metalplane.inference.plugins.filter.modelplane import FilterModule
from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._modelplane.plan import inventory_plan

L40S = {"name": "l40s", "class_name": "l40s-1x", "node_count": 2}
A16 = {"name": "a16"}  # class defaults to the pool name
A16_B = {"name": "a16-b", "class_name": "a16"}  # a second pool of the same class
EXPLICIT = [{"name": "l40s-1x", "spec": {"devices": []}}]
INVENTORY = {"node-1": {"pool": "l40s", "count": 1}}


@pytest.mark.parametrize(
    ("pools", "classes", "inventory", "run", "expected"),
    [
        # every class generated, nothing given: inventory every pool, in pool order
        ([L40S, A16], [], {}, (False, False), (["l40s-1x", "a16"], ["l40s", "a16"], False)),
        # a given class is not generated, its pool not inventoried
        ([L40S, A16], EXPLICIT, {}, (False, False), (["a16"], ["a16"], False)),
        # every class given: nothing to inventory
        ([L40S], EXPLICIT, {}, (False, False), ([], [], False)),
        # two pools of one class: one class, both pools inventoried
        ([A16, A16_B], [], {}, (False, False), (["a16"], ["a16", "a16-b"], False)),
        # a null class_name is the pool name, as the module reads it
        ([{"name": "a16", "class_name": None}], [], {}, (False, False), (["a16"], ["a16"], False)),
        # an inventory is given: nothing to gather, whatever the run
        ([L40S, A16], [], INVENTORY, (False, False), (["l40s-1x", "a16"], [], False)),
        ([L40S], [], INVENTORY, (True, True), (["l40s-1x"], [], False)),
        # a dry run that labels the nodes cannot see them by their label
        ([L40S, A16], [], {}, (True, True), (["l40s-1x", "a16"], [], True)),
        # ... unless no class is generated from them
        ([L40S], EXPLICIT, {}, (True, True), ([], [], False)),
        # a dry run with the labels already in place plans as a real run does
        ([L40S], [], {}, (True, False), (["l40s-1x"], ["l40s"], False)),
        # a real run that labels the nodes has set the labels before the inventory
        ([L40S], [], {}, (False, True), (["l40s-1x"], ["l40s"], False)),
        # a null inventory is no inventory
        ([L40S], [], None, (True, True), (["l40s-1x"], [], True)),
    ],
    ids=[
        "all-generated",
        "given-class-wins",
        "all-given",
        "one-class-two-pools",
        "null-class-name",
        "inventory-given",
        "inventory-given-dry-run",
        "dry-run-labelling",
        "dry-run-labelling-nothing-generated",
        "dry-run-labels-in-place",
        "real-run-labelling",
        "null-inventory",
    ],
)
def test_inventory_plan(
    pools: list[dict[str, Any]],
    classes: list[dict[str, Any]],
    inventory: Any,
    run: tuple[bool, bool],
    expected: tuple[list[str], list[str], bool],
) -> None:
    """``run``: (dry_run, labelled)."""
    plan = inventory_plan(pools, classes, inventory, dry_run=run[0], labelled=run[1])
    assert (plan["generated_classes"], plan["inventory_pools"], plan["unplannable"]) == expected


@pytest.mark.parametrize(
    ("pools", "field"),
    [([], "node_pools"), ([{"name": "a16", "size": 2}], "node_pools[0]"), (["a16"], "node_pools[0]")],
    ids=["no-pool", "unknown-key", "not-a-mapping"],
)
def test_bad_node_pools_are_refused_as_the_module_refuses_them(pools: list[Any], field: str) -> None:
    with pytest.raises(InputError) as exc:
        inventory_plan(pools, [], {}, dry_run=False, labelled=False)
    assert exc.value.field == field


def test_the_filter_passes_jinja_values_and_names_itself_in_errors() -> None:
    plan_filter = FilterModule().filters()["modelplane_inventory_plan"]
    assert plan_filter([L40S, A16], EXPLICIT, {}, dry_run=True, labelled=True) == {
        "generated_classes": ["a16"],
        "inventory_pools": [],
        "unplannable": True,
    }
    with pytest.raises(AnsibleFilterError, match="modelplane_inventory_plan: node_pools"):
        plan_filter([], [], {})
