"""The order of site.yml's plays: every preflight runs before the first play that can write.

Why: each preflight play is ``any_errors_fatal``, and a play whose hosts all failed ends the whole run, so a
problem found by any preflight stops the run before anything is created, changed or claimed on either path. That
holds only while no writing play comes before a preflight: a bare-metal preflight placed after the VKE plays would
let a bad bare-metal input through after VKE clusters were already created.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SITE = Path(__file__).resolve().parents[2] / "playbooks" / "site.yml"
PREFLIGHT_TAG = "phase:preflight"


def plays() -> list[dict[str, Any]]:
    return yaml.safe_load(SITE.read_text())


def is_preflight(play: dict[str, Any]) -> bool:
    return PREFLIGHT_TAG in (play.get("tags") or [])


def test_every_preflight_comes_before_the_first_play_that_writes() -> None:
    order = [(play["name"], is_preflight(play)) for play in plays()]
    preflights = [index for index, (_name, preflight) in enumerate(order) if preflight]
    assert len(preflights) == 2, order  # the VKE clusters' and the bare-metal clusters'
    assert preflights == list(range(len(preflights))), f"a play that writes runs before a preflight: {order}"


def test_every_preflight_stops_the_run_on_any_problem() -> None:
    for play in plays():
        if is_preflight(play):
            assert play.get("any_errors_fatal") is True, play["name"]
