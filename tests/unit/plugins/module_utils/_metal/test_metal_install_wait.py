"""The wait for the installer's power-off (``provision_run._wait_power_off_or_stranded``), table-driven.

Why: the wait decides between three readings of the BMC that look alike for a moment: the installer's final
power-off, an installer stranded without its media (a BMC reset ejected the ISO: the server stays on with an empty
virtual CD), and a BMC that does not answer while it restarts. A wrong call either restarts a good install or waits
out the whole install timeout, so each sequence of observations has its expected outcome here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from metal_fakes import FakeModule

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError, WaitTimeout
from ansible_collections.metalplane.inference.plugins.module_utils._metal import provision_run as pr
from ansible_collections.metalplane.inference.plugins.module_utils._redfish.errors import BmcNotReady

ISO = "https://ctl.example:8443/hosts/token/r730.iso"
DOWN = BmcNotReady("Reading the power state failed: the BMC is unreachable (connection refused)")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Observed:
    """A claimed host whose BMC answers the given (power, media) observations in turn; power may be an error."""

    def __init__(self, observations: list[tuple[Any, str | None]]) -> None:
        self._next: Iterator[tuple[Any, str | None]] = iter(observations)
        self._media: str | None = None
        self.polls = 0
        self.client = self

    def system_path(self) -> str:
        return "/redfish/v1/Systems/System.Embedded.1"

    def get_json(self, _path: str, _what: str) -> dict[str, Any]:
        power, self._media = next(self._next)
        self.polls += 1
        if isinstance(power, Exception):
            raise power
        return {"PowerState": power}

    def media_image(self, *, strict: bool = False) -> str | None:
        assert strict, "the wait acts on an empty CD, so it must read it strictly"
        return self._media


@pytest.mark.parametrize(
    ("observations", "off_polls", "power", "polls"),
    [
        # The installer runs, then powers the server off.
        ([("On", ISO), ("On", ISO), ("Off", ISO)], 1, "Off", 3),
        # PoweringOff counts as off.
        ([("On", ISO), ("PoweringOff", ISO)], 1, "Off", 2),
        # One empty reading between good ones is not a stranded installer; two in a row are.
        ([("On", None), ("On", ISO), ("On", None), ("On", None)], 1, "On", 4),
        # A BMC that does not answer in between resets the count, and is not a failure.
        ([("On", None), (DOWN, None), ("On", None), ("Off", ISO)], 1, "Off", 4),
        ([(DOWN, None), (DOWN, None), ("On", None), ("On", None)], 1, "On", 4),
        # After a restart into the installer: a moment off (a power cycle) is not the end; off twice in a row is.
        ([("Off", ISO), ("On", ISO), ("Off", ISO), ("Off", ISO)], 2, "Off", 4),
    ],
)
def test_the_wait_ends_on_the_power_off_or_a_stranded_installer(
    observations: list[tuple[Any, str | None]], off_polls: int, power: str, polls: int
) -> None:
    clock = Clock()
    host = Observed(observations)
    seen = pr._wait_power_off_or_stranded(host, 3600, clock, off_polls=off_polls, sleep=clock.sleep)  # type: ignore[arg-type]
    assert seen["power"] == power
    assert host.polls == polls
    if power == "On":
        assert seen["media"] is None


def test_a_bmc_that_never_answers_times_out_naming_the_console() -> None:
    clock = Clock()
    host = Observed([(DOWN, None)] * 1000)
    with pytest.raises(WaitTimeout) as caught:
        pr._wait_power_off_or_stranded(host, 60, clock, off_polls=1, sleep=clock.sleep)  # type: ignore[arg-type]
    assert "did not finish within 60s" in caught.value.msg
    assert "'power': 'unknown'" in caught.value.msg


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"media_url": "ftp://ctl.example/r730.iso"}, "media_url"),
        ({"media_url": "/srv/isos/r730.iso"}, "media_url"),
        ({"media_retries": -1}, "media_retries"),
        ({"media_retries": 6}, "media_retries"),
    ],
)
def test_bad_media_options_are_refused_before_connecting(params: dict[str, Any], field: str) -> None:
    connected: list[bool] = []

    def factory(_params: Any) -> Any:
        connected.append(True)
        raise AssertionError("connected")

    module = FakeModule({"step": "wait_installed", "wait_timeout": 60, "media_retries": 2, **params})
    with pytest.raises(InputError) as caught:
        pr.run_host_provision(module, store_factory=factory)
    assert caught.value.field == field
    assert connected == []
