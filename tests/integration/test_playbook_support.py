"""The playbook runner's TMPDIR guard keeps its promise: the longest TMPDIR it allows still runs.

Why: CI once failed three playbook tests with "Local RPC server did not start" because pytest's
``tmp_path`` had grown (``pytest-100/popen-gw1/...``) past what ansible-core's RPC socket can use.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.playbook import MAX_TMPDIR_CHARS, check_tmpdir


def test_longest_allowed_tmpdir_runs_a_playbook(playbook: Callable[..., Any], ansible_tmp: Path) -> None:
    longest = ansible_tmp / ("d" * (MAX_TMPDIR_CHARS - len(str(ansible_tmp)) - 1))
    longest.mkdir()
    assert len(str(longest)) == MAX_TMPDIR_CHARS
    run = playbook([{"name": "probe", "ansible.builtin.ping": {}}], env={"TMPDIR": str(longest)})
    assert run.rc == 0, run.stderr[-2000:]
    assert run.task("probe")["ping"] == "pong"


@pytest.mark.parametrize(
    ("tmpdir", "refused"),
    [
        ("", False),
        ("/tmp/mp-abc", False),
        ("/tmp/" + "x" * (MAX_TMPDIR_CHARS - 5), False),
        ("/tmp/" + "x" * (MAX_TMPDIR_CHARS - 4), True),
        ("/tmp/pytest-of-root/pytest-100/popen-gw1/test_k8s_info_on_resource_slic0/tmp", True),
    ],
)
def test_tmpdir_guard(tmpdir: str, refused: bool) -> None:
    env = {"TMPDIR": tmpdir} if tmpdir else {}
    if refused:
        with pytest.raises(ValueError, match="ansible_tmp fixture"):
            check_tmpdir(env)
    else:
        check_tmpdir(env)
