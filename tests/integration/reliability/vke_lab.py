"""The lab behind site.yml's VKE path: the Vultr emulator (contract on, twin workload APIs), the Modelplane control
plane, and the ``endpoints.yml`` the shipped ``inventories/lab`` reads.

Why one helper: test_site_playbook.py, the secret scan and the kill points all drive site.yml end to end on a fresh
lab, with credentials of the test's choosing.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lab.modelplane.server import ModelplaneEmulator
from lab.vultr.contract import assert_no_violations, contract_or_skip
from lab.vultr.server import VultrEmulator

REPO = Path(__file__).resolve().parents[3]
SITE = REPO / "playbooks" / "site.yml"
INVENTORY = REPO / "inventories" / "lab"
LONGHORN_CHART = REPO / "tests" / "lab" / "charts" / "longhorn-standin"
HELM = REPO / ".build" / "bin" / "helm"


@dataclass
class VkeLab:
    vultr: VultrEmulator
    mp: ModelplaneEmulator
    state: Path
    tmp: Path

    def env(self, **extra: str) -> dict[str, str]:
        return {"LAB_STATE_DIR": str(self.state), "TMPDIR": str(self.tmp), "VULTR_API_KEY": "", **extra}


@contextmanager
def vke_lab(root: Path, tmp: Path, *, api_key: str, token: str | None = None) -> Iterator[VkeLab]:
    """A fresh lab; ``token`` is the control plane's bearer token (the emulator's default when None)."""
    state = root / "state"
    state.mkdir()
    extra: dict[str, Any] = {} if token is None else {"token": token}
    with (
        ModelplaneEmulator(delay_scale=0.0, **extra) as mp,
        VultrEmulator(
            delay_scale=0.0, api_key=api_key, contract=contract_or_skip(), twin=True, validator_ready_after=0
        ) as vultr,
    ):
        endpoints = {
            "lab": {
                "state_dir": str(state),
                "delay_scale": 0.0,
                "longhorn_chart_path": str(LONGHORN_CHART),
                "helm": str(HELM) if HELM.exists() else (shutil.which("helm") or ""),
            },
            "emulators": {
                "vultr": {"api_endpoint": vultr.endpoint, "api_key": api_key},
                "modelplane": {"kubeconfig": str(mp.kubeconfig_path)},
            },
        }
        (state / "endpoints.yml").write_text(yaml.safe_dump(endpoints))
        yield VkeLab(vultr, mp, state, tmp)
        assert_no_violations(vultr)
