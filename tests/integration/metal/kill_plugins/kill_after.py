# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only callback: SIGKILL the ansible-playbook process right after a named task finished.

Why: the resumability tests need a run that dies the way a killed controller does (no handlers, no cleanup,
no final report) at a chosen point, then a second run that must converge with one claim and one install.
``METALPLANE_KILL_AFTER`` names the task (its name as written in the role, before templating); the process is
killed when that task's result comes back ok or changed on any host.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: kill_after
type: aggregate
short_description: kill ansible-playbook after a named task (tests only)
description: Sends SIGKILL to its own process after the task named in METALPLANE_KILL_AFTER finished.
requirements: [enable in callbacks_enabled]
"""

ENV = "METALPLANE_KILL_AFTER"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "kill_after"
    CALLBACK_NEEDS_ENABLED = True

    def v2_runner_on_ok(self, result: Any) -> None:
        wanted = os.environ.get(ENV)
        if wanted and result._task.name == wanted:  # the result's task, as Ansible's own callbacks read it
            os.kill(os.getpid(), signal.SIGKILL)
