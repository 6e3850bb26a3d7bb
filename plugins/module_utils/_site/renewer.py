# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A detached process that outlives the module which starts it: the run lock's renewer.

Why a process and not a task: an Ansible module runs once and exits, but the lock must be renewed for the whole
run, including while another module waits an hour for an installer. Ansible's own ``async`` does the same (its
``async_wrapper`` daemonizes); this is that pattern, reduced to what the renewer needs:

- a double fork with ``setsid``, so the renewer is nobody's child and not in the playbook's process group (a kill
  of the run's group leaves it to notice the run is gone and release the lock, instead of leaving it held);
- standard streams on ``/dev/null`` and every other descriptor closed, or the controller would wait for the end of
  the module's output pipe as long as the renewer lives;
- ``os._exit``, so the module wrapper's cleanup (removing its temporary files) never runs twice.
"""

from __future__ import annotations

import os
from collections.abc import Callable

# Highest descriptor closed in the renewer; descriptors above it are not inherited by anything that matters here.
MAX_FD = 4096


def start_detached(work: Callable[[], object]) -> int | None:
    """Run ``work`` in a detached grandchild process; its PID, or None when the fork failed."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        status = 1
        try:
            os.setsid()
            grandchild = os.fork()
            if grandchild:
                os.write(write_end, str(grandchild).encode())
                status = 0
            else:
                os.chdir("/")
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.closerange(3, MAX_FD)
                try:
                    work()
                    status = 0
                finally:
                    os._exit(status)
        finally:
            os._exit(status)
    os.close(write_end)
    os.waitpid(child, 0)
    answer = os.read(read_end, 32)
    os.close(read_end)
    return int(answer) if answer else None
