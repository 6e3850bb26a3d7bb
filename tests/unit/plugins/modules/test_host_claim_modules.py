"""host_claim and host_pool_info: argument spec vs documentation, and bad input through main() before any request.

The kubeconfig names a server nobody listens on (port 9) and the BMCs likewise: a request would fail with a
connection error, so an ``input`` error naming the field proves validation came first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args

from ansible_collections.metalplane.inference.plugins.doc_fragments.metal_pool import (
    ModuleDocFragment as PoolFragment,
)
from ansible_collections.metalplane.inference.plugins.doc_fragments.modelplane import (
    ModuleDocFragment as ModelplaneFragment,
)
from ansible_collections.metalplane.inference.plugins.modules import host_claim, host_pool_info

SECRET = "bmc-s3cret"
KUBECONFIG = """apiVersion: v1
kind: Config
current-context: mp
clusters: [{name: mp, cluster: {server: "https://127.0.0.1:9"}}]
contexts: [{name: mp, context: {cluster: mp, user: u}}]
users: [{name: u, user: {token: t}}]
"""


def _options(documentation: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for fragment in (ModelplaneFragment.DOCUMENTATION, PoolFragment.DOCUMENTATION, documentation):
        options.update(yaml.safe_load(fragment)["options"])
    return options


def _compare(spec: dict[str, Any], docs: dict[str, Any], where: str) -> None:
    assert set(spec) == set(docs), where
    for name, option in spec.items():
        doc = docs[name]
        for key, default in (("type", "str"), ("default", None), ("choices", None), ("elements", None)):
            assert option.get(key, default) == doc.get(key, default), f"{where}.{name}.{key}"
        assert option.get("required", False) == doc.get("required", False), f"{where}.{name}"
        assert sorted(option.get("aliases", [])) == sorted(doc.get("aliases", [])), f"{where}.{name}"
        if "options" in option:
            _compare(option["options"], doc["suboptions"], f"{where}.{name}")


@pytest.mark.parametrize("module", [host_claim, host_pool_info])
def test_argument_spec_matches_documentation(module: Any) -> None:
    _compare(module.argument_spec(), _options(module.DOCUMENTATION), "options")


def test_the_password_suboption_is_no_log() -> None:
    assert host_claim.argument_spec()["hosts"]["options"]["password"]["no_log"] is True


def _host(**overrides: Any) -> dict[str, Any]:
    return {
        "name": "r730-a",
        "bmc_url": "https://127.0.0.1:9",
        "username": "root",
        "password": SECRET,
        "boot_mac": "00:5c:52:31:3a:9c",
        **overrides,
    }


@pytest.mark.parametrize(
    ("module", "args", "field"),
    [
        (host_claim, {"hosts": []}, "hosts"),
        (host_pool_info, {"hosts": []}, "hosts"),
        (host_claim, {"pool": "r730 lab"}, "pool"),
        (host_claim, {"hosts": [_host(boot_mac="00:5c:52:31:3a")]}, "hosts[0].boot_mac"),
        (host_pool_info, {"hosts": [_host(boot_mac="bad")]}, "hosts[0].boot_mac"),
        (host_claim, {"hosts": [_host(), _host(boot_mac="00:5c:52:31:3a:9d")]}, "hosts[1].name"),
        (host_claim, {"hosts": [_host(bmc_url="idrac.example")]}, "hosts[0].bmc_url"),
        (host_claim, {"cluster": "R730_DC1"}, "cluster"),
        (host_claim, {"host": "not-in-pool"}, "host"),
        (host_claim, {"requirements": {"gpu_count": 0}}, "requirements.gpu_count"),
        (host_claim, {"api_timeout": 0}, "api_timeout"),
        (host_claim, {"host_selector": {"pool": "r730"}}, "host_selector"),  # a Lease claim has no selector
        (host_claim, {"backend": "metal3", "reinstall": True}, "reinstall"),
        (host_claim, {"backend": "metal3", "cluster": "R730_DC1", "hosts": [_host(personality="idrac8")]}, "cluster"),
        (host_claim, {"backend": "metal3", "hosts": [_host(bmc_url="idrac.example")]}, "hosts[0].bmc_url"),
    ],
)
def test_bad_input_fails_before_any_request(
    module: Any, args: dict[str, Any], field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "mp.kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    base: dict[str, Any] = {"kubeconfig": str(kubeconfig), "pool": "r730", "hosts": [_host()]}
    if module is host_claim:
        base["cluster"] = "dc1"
    with patch_module_args({**base, **args}), pytest.raises(SystemExit):
        module.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] is True
    assert result["error"] == {"kind": "input", "field": field}
    assert result["msg"].startswith(f"{field}: ")
    assert SECRET not in json.dumps(result)
