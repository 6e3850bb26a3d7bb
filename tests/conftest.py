"""Test-wide set-up: the collection is importable and playbooks can be run from any test."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.common.reference import REFERENCE_DIR, SKIP_PREFIX
from support.collection import install_collection_finder
from support.playbook import SHORT_TMP_ROOT, PlaybookRun, run_playbook

install_collection_finder()


@pytest.fixture
def playbook() -> Callable[..., PlaybookRun]:
    """``playbook(tasks, **kwargs)`` runs real ansible-playbook; see ``support.playbook.run_playbook``."""

    def _run(tasks_or_plays: Any, **kwargs: Any) -> PlaybookRun:
        return run_playbook(tasks_or_plays, **kwargs)

    return _run


@pytest.fixture
def ansible_tmp() -> Iterator[Path]:
    """A fresh, *short* TMPDIR for one ansible-playbook run (see ``support.playbook.MAX_TMPDIR_CHARS``).

    Not ``tmp_path``: pytest's paths grow with the run counter (``pytest-100/popen-gw1/...``) and
    ansible-core 2.20+ puts a Unix socket under TMPDIR, whose path must fit in 108 bytes.
    """
    path = Path(tempfile.mkdtemp(prefix="mp-", dir=SHORT_TMP_ROOT))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say loudly how many tests could not check the platforms' own contracts, and why."""
    skipped = [
        report
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple) and SKIP_PREFIX in str(report.longrepr[2])
    ]
    if skipped:
        terminalreporter.write_sep(
            "!",
            f"{len(skipped)} tests skipped: the shared reference tree is absent at {REFERENCE_DIR} "
            "(Vultr OpenAPI overlay, Modelplane XRDs); set METALPLANE_REFERENCE_DIR to check them",
            yellow=True,
        )
