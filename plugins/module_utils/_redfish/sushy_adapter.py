# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The only file of this collection that touches sushy's private internals.

Why: sushy has no public hook for a few things the Redfish client needs, so they reach into names
sushy does not promise to keep. Keeping every such access here means a sushy release that moves one
breaks one small file, and ``tests/unit/plugins/module_utils/_redfish/test_sushy_adapter.py`` says
which attribute moved and in which sushy version (``requirements.txt`` pins the range it was checked
against; ``tests/unit/plugins/module_utils/test_library_internals.py`` keeps the rest of ``plugins/``
out of sushy's internals). What is private, and why no public API does it:

* ``Connector._op``: the one method every sushy request goes through (``get``/``post``/``patch``/
  ``put``/``delete``, ``TaskMonitor`` polls, sushy's own retries and re-logins, which call
  ``self._op`` again). sushy has no hook *around* a request (``response_callback`` only sees the
  response), and the HTTP-Basic-refused-a-write fallback must catch the ``AccessError`` and send the
  request once more. :class:`InterceptingConnector` overrides it once and hands every request to the
  public :meth:`InterceptingConnector.intercept`.
* ``Connector._session`` (a ``requests.Session``): whether requests carry HTTP Basic credentials is
  only recorded there (``BasicAuth`` sets ``session.auth``, ``SessionAuth.reset_session_attrs``
  clears it directly, bypassing the connector's public setters), and a GET with the current
  credentials but without sushy's retries and re-login (is the BMC going down after a reset?) can
  only be sent on it.
* ``Sushy._auth``: the auth object ``Sushy.__del__`` closes. sushy takes it only in the
  constructor; the client replaces it when it switches to a session and clears it once it has
  closed the session itself.
* ``System.__new__``: ``System.__init__`` takes no document, but its base ``ResourceBase.__init__``
  does (``json_doc``, the way sushy builds expanded members), so a System answered by
  ``Systems?only`` is built without reading it again.

Public sushy API does the rest: the request log is the connector's ``response_callback`` argument,
and a PATCH guarded by ``If-Match`` is ``Connector.patch(headers={"If-Match": ...})`` without
sushy's ``etag`` argument (with it, sushy answers a 412 by sending the PATCH again without
``If-Match``; without it, the 412 is raised: ``Connector._etag_handler`` in
https://opendev.org/openstack/sushy/src/branch/master/sushy/connector.py).
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from typing import Any

try:
    from sushy import connector as sushy_connector
    from sushy.resources import base as sushy_base
    from sushy.resources.system import system as sushy_system

    SUSHY_ADAPTER_IMPORT_ERROR: str | None = None
    _CONNECTOR_BASE: Any = sushy_connector.Connector
except ImportError:  # pragma: no cover - exercised by the sanity import test
    SUSHY_ADAPTER_IMPORT_ERROR = traceback.format_exc()
    _CONNECTOR_BASE = object

# The private sushy members this file uses, by the class that owns them (``_session`` and ``_auth`` are
# set in ``__init__``). The adapter test checks each still exists in the installed sushy and fails
# naming the member and the version (the System built without ``System.__init__`` is checked by
# comparing it with one sushy builds); update this table, the code below and the pin in
# requirements.txt together.
SUSHY_PRIVATE_MEMBERS: dict[str, tuple[str, ...]] = {
    "sushy.connector.Connector": ("_op", "_session"),
    "sushy.main.Sushy": ("_auth",),
}


class InterceptingConnector(_CONNECTOR_BASE):  # type: ignore[misc,valid-type]
    """sushy's ``Connector`` with one public override point around every request.

    Subclasses override :meth:`intercept`; nothing outside this file overrides or calls ``_op``.
    """

    def _op(self, method: str, path: str = "", *args: Any, allow_reauth: bool = True, **kwargs: Any) -> Any:
        send = functools.partial(super()._op, method, path, *args, **kwargs)
        return self.intercept(method, path, send, allow_reauth=allow_reauth)

    def intercept(self, method: str, path: str, send: Callable[..., Any], *, allow_reauth: bool) -> Any:
        """Send one request: ``send(allow_reauth=...)`` runs sushy's own request handler.

        ``allow_reauth=False`` stops sushy from logging in again and resending on a 401.
        """
        return send(allow_reauth=allow_reauth)

    @property
    def sends_basic(self) -> bool:
        """Whether requests now carry HTTP Basic credentials (not a session token)."""
        return self._session.auth is not None

    def get_unmanaged(self, url: str, *, verify: Any, timeout: Any) -> Any:
        """One GET with this connector's credentials, outside sushy's request handler.

        No retries, no re-login, no exception for an error status: the caller reads the status.
        The response is not passed to ``response_callback``; the caller logs it.
        """
        return self._session.get(url, verify=verify, timeout=timeout)


def set_root_auth(root: Any, auth: Any) -> None:
    """Make ``auth`` the authentication ``Sushy.__del__`` closes; ``None``: nothing left to close."""
    root._auth = auth


def system_from_document(root: Any, conn: Any, body: dict[str, Any]) -> Any:
    """A sushy System built from a document already fetched (``?only``), without reading it again.

    Later refreshes GET the System's own path as usual (its reader is sushy's default).
    """
    system = sushy_system.System.__new__(sushy_system.System)
    sushy_base.ResourceBase.__init__(
        system,
        conn,
        str(body["@odata.id"]),
        redfish_version=root.redfish_version,
        registries=root.lazy_registries,
        root=root,
        json_doc=body,
    )
    return system
