"""The lab behind site.yml's VKE path: the Vultr emulator (contract on, twin workload APIs), the Modelplane control
plane, and the ``endpoints.yml`` the shipped ``inventories/lab`` reads.

Why one helper: test_site_playbook.py, the secret scan and the kill points all drive site.yml end to end on a fresh
lab, with credentials of the test's choosing.
"""

from __future__ import annotations

import shutil
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

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


class VkeLabContext:
    """A fresh lab; ``token`` is the control plane's bearer token (the emulator's default when None), ``seed`` the
    Vultr emulator's.

    A class, not a generator context manager: fixtures yield from inside it, and a generator's context would not be
    exited if the fixture's generator were not run to its end.
    """

    def __init__(self, root: Path, tmp: Path, *, api_key: str, token: str | None = None, seed: int = 0) -> None:
        self.state = root / "state"
        self.tmp = tmp
        self.api_key = api_key
        self.stack = ExitStack()
        self.mp = ModelplaneEmulator(delay_scale=0.0, **({} if token is None else {"token": token}))
        self.vultr = VultrEmulator(
            delay_scale=0.0,
            api_key=api_key,
            contract=contract_or_skip(),
            twin=True,
            validator_ready_after=0,
            seed=seed,  # of the ids and of the probabilistic faults a test injects
        )

    def __enter__(self) -> VkeLab:
        self.state.mkdir()
        mp = self.stack.enter_context(self.mp)
        vultr = self.stack.enter_context(self.vultr)
        endpoints = {
            "lab": {
                "state_dir": str(self.state),
                "delay_scale": 0.0,
                "longhorn_chart_path": str(LONGHORN_CHART),
                "helm": str(HELM) if HELM.exists() else (shutil.which("helm") or ""),
            },
            "emulators": {
                "vultr": {"api_endpoint": vultr.endpoint, "api_key": self.api_key},
                "modelplane": {"kubeconfig": str(mp.kubeconfig_path)},
            },
        }
        (self.state / "endpoints.yml").write_text(yaml.safe_dump(endpoints))
        return VkeLab(vultr, mp, self.state, self.tmp)

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                assert_no_violations(self.vultr)
        finally:
            self.stack.close()
