"""Test-wide set-up: the collection is importable and playbooks can be run from any test."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from support.collection import install_collection_finder
from support.playbook import PlaybookRun, run_playbook

install_collection_finder()


@pytest.fixture
def playbook() -> Callable[..., PlaybookRun]:
    """``playbook(tasks, **kwargs)`` runs real ansible-playbook; see ``support.playbook.run_playbook``."""

    def _run(tasks_or_plays: Any, **kwargs: Any) -> PlaybookRun:
        return run_playbook(tasks_or_plays, **kwargs)

    return _run
