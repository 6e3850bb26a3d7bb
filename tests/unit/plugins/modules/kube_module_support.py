"""Shared helpers for the kube_ready/gpu_ready module tests: run main() against a FakeFeed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible.module_utils.testing import patch_module_args

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "module_utils" / "_kube"))
from kube_fakes import FakeFeed, obj

from ansible_collections.metalplane.inference.plugins.module_utils._kube import runners

__all__ = ["FakeFeed", "obj", "run_module"]


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
