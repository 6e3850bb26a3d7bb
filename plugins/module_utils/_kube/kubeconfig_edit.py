# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubeconfigs the controller keeps for a kubeadm node: the admin one re-pointed, the token one for Modelplane.

Why in Python: kubeadm writes ``admin.conf`` with the server it advertised to itself (``controlPlaneEndpoint`` or
the advertise address seen from the node), which need not be the address the controller reaches the node on; and
the credential handed to Modelplane is a kubeconfig built from a ServiceAccount token Secret. Both are nested-list
edits that Jinja does badly and a test pins down here.
"""

from __future__ import annotations

import base64
import binascii
import copy
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

Kubeconfig = dict[str, Any]


def with_server(config: Any, server: str) -> Kubeconfig:
    """A copy of ``config`` whose every cluster entry names ``server`` (``https://host:port``)."""
    if not isinstance(config, dict) or not isinstance(config.get("clusters"), list) or not config["clusters"]:
        raise InputError("kubeconfig", "is not a kubeconfig with clusters: pass the parsed admin.conf (from_yaml)")
    if not str(server).startswith("https://"):
        raise InputError("server", f"{server!r} is not an https:// URL of the API server")
    edited = copy.deepcopy(config)
    for entry in edited["clusters"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("cluster"), dict):
            raise InputError("kubeconfig", f"cluster entry {entry!r} has no 'cluster' mapping")
        entry["cluster"]["server"] = str(server)
    return edited


def token_kubeconfig(secret: Any, server: str, name: str) -> Kubeconfig:
    """A kubeconfig authenticating with the token of a filled ``kubernetes.io/service-account-token`` Secret."""
    data = (secret or {}).get("data") if isinstance(secret, dict) else None
    if not isinstance(data, dict) or not data.get("token") or not data.get("ca.crt"):
        raise InputError(
            "secret", "has no data.token and data.ca.crt yet: wait until the token controller has filled it"
        )
    if not str(server).startswith("https://"):
        raise InputError("server", f"{server!r} is not an https:// URL of the API server")
    try:
        token = base64.b64decode(str(data["token"]), validate=True).decode()
        base64.b64decode(str(data["ca.crt"]), validate=True)
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise InputError("secret", f"data.token or data.ca.crt is not base64: {exc}") from exc
    user = f"{name}-modelplane"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        # data["ca.crt"] is base64 of the PEM bundle already: exactly what certificate-authority-data holds.
        "clusters": [{"name": name, "cluster": {"server": str(server), "certificate-authority-data": data["ca.crt"]}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "current-context": name,
        "preferences": {},
    }
