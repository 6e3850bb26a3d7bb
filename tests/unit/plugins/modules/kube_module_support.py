"""Shared helpers for the kube_ready/gpu_ready module tests: run main() against a FakeFeed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils" / "_kube"))
from kube_fakes import FakeFeed, obj

from ansible_collections.metalplane.inference.plugins.doc_fragments.kube import ModuleDocFragment
from ansible_collections.metalplane.inference.plugins.module_utils._kube import runners

__all__ = ["FakeFeed", "documented_options", "obj", "run_module"]


def run_module(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], main: Any, feed: FakeFeed, args: dict
) -> dict[str, Any]:
    """Run a module's ``main()`` with ``args`` (``_ansible_check_mode`` allowed) against ``feed``."""
    monkeypatch.setattr(runners, "open_feed", lambda _module: (_Closable(), feed))
    with patch_module_args(args), pytest.raises(SystemExit):
        main()
    return json.loads(capsys.readouterr().out)


class _Closable:
    def close(self) -> None:
        pass


def documented_options(documentation: str) -> dict[str, Any]:
    """The module's options plus those of the kube doc fragment, as ansible-doc merges them."""
    options = dict(yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"])
    options.update(yaml.safe_load(documentation)["options"])
    return options


def assert_spec_matches_docs(spec: dict[str, Any], documentation: str) -> None:
    docs = documented_options(documentation)
    assert set(spec) == set(docs)
    for name, option in spec.items():
        doc = docs[name]
        assert option.get("type", "str") == doc.get("type", "str"), name
        assert option.get("default") == doc.get("default"), name
        assert option.get("choices") == doc.get("choices"), name
        assert option.get("elements") == doc.get("elements"), name
        assert option.get("required", False) == doc.get("required", False), name
        assert sorted(option.get("aliases", [])) == sorted(doc.get("aliases", [])), name
