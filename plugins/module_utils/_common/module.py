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

from .api_retries import with_retries
from .errors import InputError, MetalplaneError

# Whole-number options that are durations or counts, by name: a negative one is never meant (a typo, a sign slip),
# and acting on it would wait forever, not at all, or retry nonsensically. The HTTP timeouts must be positive: a
# zero-second request cannot succeed.
NON_NEGATIVE_SUFFIXES = ("timeout", "_delay", "_retries")
POSITIVE = frozenset({"api_timeout"})


def check_whole_numbers(argument_spec: Mapping[str, Any], params: Mapping[str, Any]) -> None:
    """Refuse a negative duration or count (or a zero HTTP timeout) among the top-level int options."""
    for name, option in argument_spec.items():
        value = params.get(name)
        if option.get("type") != "int" or value is None or isinstance(value, bool):
            continue
        if name in POSITIVE and value < 1:
            raise InputError(name, f"must be a positive number of seconds, got {value}")
        if name.endswith(NON_NEGATIVE_SUFFIXES) and value < 0:
            raise InputError(name, f"must be zero or more, got {value}")


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
            check_whole_numbers(self.ansible.argument_spec, self.params)
            result = with_retries(dict(action(self)))
        except MetalplaneError as exc:
            self.ansible.fail_json(msg=exc.msg, error=exc.to_result(), exception=traceback.format_exc())
        self.ansible.exit_json(**result)
