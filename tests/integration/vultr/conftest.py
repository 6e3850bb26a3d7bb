"""Fixtures for the Vultr modules' integration tests: in-process VKE emulators, made by one factory.

Every exchange is validated against the overlay spec (``lab.vultr.contract``); a violation fails the
test after it ran. Tests talk to the emulator through real ansible-playbook runs.

``make_emu(delay_scale=..., seed=..., **options)`` starts an emulator with the lab API key and the
contract check (any other ``VultrEmulator`` option may be given); every emulator it made is stopped
and checked for contract violations when the test ends. ``emu`` is the default one (instant, seed 7).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lab.vultr.contract import assert_no_violations, contract_or_skip
from lab.vultr.server import VultrEmulator

API_KEY = "lab-vultr-api-key"
DEFAULT_SEED = 7  # ids and probabilistic faults are reproducible per seed

EmulatorFactory = Callable[..., VultrEmulator]


@pytest.fixture
def make_emu() -> Iterator[EmulatorFactory]:
    made: list[VultrEmulator] = []

    def make(delay_scale: float = 0.0, seed: int = DEFAULT_SEED, **options: Any) -> VultrEmulator:
        options.setdefault("api_key", API_KEY)
        options.setdefault("contract", contract_or_skip())
        emulator = VultrEmulator(delay_scale=delay_scale, seed=seed, **options)
        made.append(emulator)
        return emulator.start()

    yield make
    for emulator in made:
        emulator.stop()
    for emulator in made:
        assert_no_violations(emulator)


@pytest.fixture
def emu(make_emu: EmulatorFactory) -> VultrEmulator:
    return make_emu()


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
