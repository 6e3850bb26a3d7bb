"""Fixtures for the Vultr modules' integration tests: an in-process VKE emulator per test.

Every exchange is validated against the overlay spec (``lab.vultr_contract``); a violation fails the
test after it ran. Tests talk to the emulator through real ansible-playbook runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lab.vultr import VultrEmulator
from lab.vultr_contract import assert_no_violations, contract_or_skip

API_KEY = "lab-vultr-api-key"


@pytest.fixture
def emu() -> Iterator[VultrEmulator]:
    emulator = VultrEmulator(delay_scale=0.0, api_key=API_KEY, contract=contract_or_skip(), seed=7)
    emulator.start()
    try:
        yield emulator
    finally:
        emulator.stop()
    assert_no_violations(emulator)


@pytest.fixture
def vultr_env(emu: VultrEmulator) -> dict[str, str]:
    """Credentials and endpoint through the documented environment fallbacks."""
    return {"VULTR_API_KEY": API_KEY, "VULTR_API_ENDPOINT": emu.endpoint}


@pytest.fixture
def vplay(playbook: Callable[..., Any], vultr_env: dict[str, str]) -> Callable[..., Any]:
    """``vplay(tasks, **kw)``: the ``playbook`` fixture with the emulator's env set."""

    def _run(tasks: Any, **kwargs: Any) -> Any:
        env = {**vultr_env, **kwargs.pop("env", {})}
        return playbook(tasks, env=env, **kwargs)

    return _run
