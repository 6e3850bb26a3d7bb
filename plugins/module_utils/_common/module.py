# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one wrapper around AnsibleModule that every module of this collection uses.

Why: modules stay tiny (argument spec, docs, one call into module_utils) and fail in exactly one
place. Library checks go through ``missing_required_lib`` so a missing SDK is a clear message,
and any ``MetalplaneError`` raised anywhere below becomes one ``fail_json`` carrying the
error's structured details.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from .errors import MetalplaneError


class MetalplaneModule:
    """Thin composition over ``AnsibleModule`` (not a subclass, so its API stays small)."""

    def __init__(self, argument_spec: dict[str, Any], *, supports_check_mode: bool = True, **kwargs: Any) -> None:
        self.ansible = AnsibleModule(argument_spec=argument_spec, supports_check_mode=supports_check_mode, **kwargs)

    @property
    def params(self) -> dict[str, Any]:
        return self.ansible.params

    @property
    def check_mode(self) -> bool:
        return bool(self.ansible.check_mode)

    @property
    def diff_mode(self) -> bool:
        return bool(self.ansible._diff)

    def require(self, library: str, import_traceback: str | None) -> None:
        """Fail with install advice when a third-party import failed at module load time."""
        if import_traceback is not None:
            self.ansible.fail_json(msg=missing_required_lib(library), exception=import_traceback)

    def warn(self, message: str) -> None:
        self.ansible.warn(message)

    def log_secret(self, value: str | None) -> None:
        """Mask a secret learnt at run time (token, kubeconfig) in every later output."""
        if value:
            self.ansible.no_log_values.add(value)

    def run(self, action: Callable[[MetalplaneModule], Mapping[str, Any]]) -> NoReturn:
        """Run ``action`` and exit: its mapping is the result; a ``MetalplaneError`` fails once."""
        try:
            result = dict(action(self))
        except MetalplaneError as exc:
            self.ansible.fail_json(msg=exc.msg, error=exc.to_result(), exception=traceback.format_exc())
        self.ansible.exit_json(**result)
