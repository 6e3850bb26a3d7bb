"""``vke_node_pool`` ``state: absent`` plans (check mode: no request): what is deleted, what is left alone.

What is left alone is returned as ``skipped_pools``, never as ``skipped``: Ansible reserves that key
(a list there is warned about, turned into True and shows the task as skipped).
"""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._vultr.node_pool import pool_spec_from_params
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.pool_ops import PoolOptions, remove_pools

GPU = "vcg-l40s-16c-180g-48vram"


class NoRequests:
    """A client that must not be used: check mode plans without asking the API."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"check mode must not call client.{name}")


def pool(label: str, tag: str | None, pool_id: str) -> dict[str, Any]:
    return {"id": pool_id, "label": label, "plan": GPU, "tag": tag, "node_quantity": 1, "nodes": []}


@pytest.mark.parametrize(
    ("pools", "force", "deleted", "skipped_pools"),
    [
        ([], False, [], []),
        ([pool("gpu", "ours", "p1")], False, ["delete pool gpu"], []),
        (
            [pool("gpu", "someone-else", "p1")],
            False,
            [],
            ["pool gpu (tag 'someone-else') is not ours; left alone"],
        ),
        ([pool("gpu", None, "p1")], False, [], ["pool gpu (tag None) is not ours; left alone"]),
        ([pool("gpu", "someone-else", "p1")], True, ["delete pool gpu"], []),
        (
            [pool("gpu-1a2b3c", "ours", "p2"), pool("other", "someone-else", "p3")],
            False,
            ["delete pool gpu-1a2b3c"],
            [],
        ),
    ],
)
def test_absent_deletes_ours_and_reports_what_it_left_alone(
    pools: list[dict[str, Any]], force: bool, deleted: list[str], skipped_pools: list[str]
) -> None:
    spec = pool_spec_from_params({"label": "gpu", "tag": "ours"}, need_plan=False)
    result = remove_pools(
        NoRequests(), {"id": "c1", "node_pools": pools}, spec, PoolOptions(force=force, check_mode=True)
    )  # type: ignore[arg-type]
    assert result["actions"] == deleted
    assert result["changed"] is bool(deleted)
    assert result["skipped_pools"] == skipped_pools
    assert "skipped" not in result
