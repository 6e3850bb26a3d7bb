# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared ``attributes`` documentation (check mode, diff mode, action groups)."""

from __future__ import annotations


class ModuleDocFragment:
    # Modules that change state: full check mode (the plan is returned, nothing is changed).
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
"""

    # Read-only modules (``*_info``) and waits.
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
"""
