"""playbooks/awx/configure.yml against awx.awx's own argument validation, offline.

Why this way: no AWX controller runs here. Each awx.awx module validates its arguments (names, types, choices,
required ones) in AnsibleModule before it connects; pointed at a closed port, every task must therefore fail on the
connection and never on its arguments. Running the real modules this way checks what the controller would receive
for every credential type, job template, survey and workflow node of vars/objects.yml, with the values configure.yml
renders, not a schema copied into the test.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.awx import load_objects
from support.collection import REPO_ROOT, ensure_collection_tree

CONFIGURE = REPO_ROOT / "playbooks" / "awx" / "configure.yml"
AWX_COLLECTIONS = REPO_ROOT / ".build" / "awx-collections"
# What awx.awx's AnsibleModule says about bad arguments (ansible-core's ArgumentSpecValidator messages).
ARGUMENT_ERRORS = ("Unsupported parameters", "missing required arguments", "must be one of", "is of type", "value of")
SETTINGS = {
    "awx_scm_url": "https://git.example.com/platform/metalplane.git",
    "awx_inventory_path": "inventories/production",
    "awx_ee_image": "registry.example.com/metalplane-inference-ee:0.1.0",
    "awx_site_slices": 4,
    "awx_vault_credential": "inventory vault",
    "awx_credentials": [
        {
            "name": "Metalplane Vultr API key",
            "credential_type": "Metalplane Vultr API key",
            "inputs": {"api_key": "not-a-real-key"},
        }
    ],
}


@pytest.fixture
def awx_collection() -> Path:
    if not (AWX_COLLECTIONS / "ansible_collections" / "awx" / "awx" / "MANIFEST.json").is_file():
        pytest.skip(f"awx.awx absent at {AWX_COLLECTIONS}: run `make awx-collection`")
    return AWX_COLLECTIONS


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def every_task_reaching_the_controller(play: dict[str, Any]) -> dict[str, Any]:
    """configure.yml's play with each task allowed to fail (so every task runs) and its results shown (no_log off:
    the credential's inputs are the test's placeholder)."""
    play = dict(play, vars_files=[str(CONFIGURE.parent / name) for name in play["vars_files"]])
    play["tasks"] = [
        {**{k: v for k, v in task.items() if k != "no_log"}, "ignore_errors": True} for task in play["tasks"]
    ]
    return play


def test_every_awx_task_passes_its_modules_argument_validation(
    playbook: Callable[..., Any], awx_collection: Path, ansible_tmp: Path
) -> None:
    (play,) = yaml.safe_load(CONFIGURE.read_text())
    env = {
        "ANSIBLE_COLLECTIONS_PATH": f"{ensure_collection_tree()}{os.pathsep}{awx_collection}",
        "CONTROLLER_HOST": f"https://127.0.0.1:{closed_port()}",
        "CONTROLLER_USERNAME": "admin",
        "CONTROLLER_PASSWORD": "unused",
        "TMPDIR": str(ansible_tmp),
    }
    run = playbook([every_task_reaching_the_controller(play)], extra_vars=SETTINGS, env=env)
    objects = load_objects()
    expected_items = {
        "Create the credential types": len(objects["awx_credential_types"]),
        "Create the credentials given in awx_credentials": len(SETTINGS["awx_credentials"]),
        "Create the job templates": len(objects["awx_job_templates"]),
    }
    seen = []
    for task in run.report["plays"][0]["tasks"]:
        name, result = task["task"]["name"], task["hosts"]["localhost"]
        if name == "Check the settings":
            assert not result.get("failed"), result
            continue
        seen.append(name)
        items = result.get("results", [result])
        assert len(items) == expected_items.get(name, 1), (name, len(items))
        for item in items:
            message = str(item.get("msg", ""))
            assert not any(error in message for error in ARGUMENT_ERRORS), (name, message)
            # Arguments accepted, the module went on to the (closed) controller.
            assert "Connection refused" in message, (name, message)
    assert seen == [
        "Create the credential types",
        "Create the credentials given in awx_credentials",
        "Register the execution environment",
        "Create the project from this repository",
        "Create the inventory",
        "Source the inventory from the project",
        "Create the job templates",
        "Create the reconcile workflow",
        "Schedule the reconcile",
    ]


def test_a_bad_argument_is_caught_by_the_same_check(
    playbook: Callable[..., Any], awx_collection: Path, ansible_tmp: Path
) -> None:
    """The check can fail: a job template with an option awx.awx does not have is an argument error."""
    env = {
        "ANSIBLE_COLLECTIONS_PATH": f"{ensure_collection_tree()}{os.pathsep}{awx_collection}",
        "CONTROLLER_HOST": f"https://127.0.0.1:{closed_port()}",
        "TMPDIR": str(ansible_tmp),
    }
    task = {"awx.awx.job_template": {"name": "x", "playbook": "site.yml", "slices": 2}, "ignore_errors": True}
    run = playbook([task], env=env)
    (result,) = [t["hosts"]["localhost"] for t in run.report["plays"][0]["tasks"]]
    assert "Unsupported parameters" in result["msg"]


def test_configure_requires_its_settings(playbook: Callable[..., Any], awx_collection: Path, ansible_tmp: Path) -> None:
    env = {"ANSIBLE_COLLECTIONS_PATH": f"{ensure_collection_tree()}{os.pathsep}{awx_collection}"}
    run = playbook(CONFIGURE, env={**env, "TMPDIR": str(ansible_tmp)})
    assert run.rc != 0
    assert "Set awx_scm_url" in run.stdout
