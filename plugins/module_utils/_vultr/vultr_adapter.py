# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The only file of this collection that touches vultr-python's private internals.

Why: vultr-python's ``Vultr`` is a Bearer-authenticated ``requests`` session (``_session``) plus verb
helpers (``get``/``post``/``patch``/``put``/``delete`` and the ``list_*``/``create_*`` helpers), all of
which send through one private method, ``_req``, with a fixed 10 s timeout, no retries, no
pagination and one exception type
(``vultr/vultr.py`` in https://github.com/cssnr/vultr-python). It offers no public hook
for any of that, so :class:`VultrBase` subclasses ``Vultr`` and keeps the two private names here:

* ``_req`` is overridden once and hands every call to the public :meth:`VultrBase.request`, which
  ``VultrClient`` overrides (timeout, typed errors, counting). We keep subclassing instead of wrapping
  a ``Vultr`` object because a wrapper could not reach the verbs' transport at all: every
  vultr-python helper would bypass our timeout, retries and error mapping, and we would re-write
  the verbs, leaving vultr-python as a constructor for a ``requests.Session``.
* ``_session`` is exposed as :attr:`VultrBase.http_session`, the session to mount the retry adapter
  on and to send with (it carries vultr-python's ``Authorization: Bearer`` header).

``tests/unit/plugins/module_utils/_vultr/test_vultr_adapter.py`` fails naming the member and the
vultr-python version when a release moves one; ``requirements.txt`` pins the range it was checked
against, and ``tests/unit/plugins/module_utils/test_library_internals.py`` keeps the rest of
``plugins/`` out of vultr-python's internals.
"""

from __future__ import annotations

import traceback
from typing import Any

VULTR_ADAPTER_IMPORT_ERROR: str | None
try:
    from vultr import Vultr

    VULTR_ADAPTER_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - exercised by the sanity import test
    VULTR_ADAPTER_IMPORT_ERROR = traceback.format_exc()
    Vultr = object  # type: ignore[assignment,misc]

# The private vultr-python members this file uses, by the class that owns them ("_session" is set in
# __init__). The adapter test checks each still exists in the installed vultr-python and fails naming
# the member and the version; update this table, the code below and the pin in requirements.txt together.
VULTR_PRIVATE_MEMBERS: dict[str, tuple[str, ...]] = {
    "vultr.vultr.Vultr": ("_req", "_session"),
}


class VultrBase(Vultr):  # type: ignore[misc,valid-type]
    """vultr-python's ``Vultr`` with its transport behind the public :meth:`request`."""

    @property
    def http_session(self) -> Any:
        """vultr-python's ``requests.Session`` (Bearer header set from the API key)."""
        return self._session

    def _req(self, method: str, url: str, data: Any = None, params: dict[str, Any] | None = None) -> Any:
        return self.request(method, url, data, params)

    def request(self, method: str, url: str, data: Any = None, params: dict[str, Any] | None = None) -> Any:
        """One API call to the absolute ``url``; vultr-python's own transport unless overridden."""
        return super()._req(method, url, data, params=params)
