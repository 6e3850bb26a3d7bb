# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubeconfig filters for the kubeadm_node role (the rules live in ``module_utils/_kube/kubeconfig_edit.py``).

Why filters: the role fetches ``admin.conf`` from the node and reads a Secret from the API; turning those into the
two kubeconfig files it writes on the controller is data shaping the role hands to tested Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import MetalplaneError
from ansible_collections.metalplane.inference.plugins.module_utils._kube.kubeconfig_edit import (
    token_kubeconfig,
    with_server,
)


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        # Documented in the sidecar files kubeconfig_server.yml and kubeconfig_token.yml.
        return {"kubeconfig_server": _kubeconfig_server, "kubeconfig_token": _kubeconfig_token}


def _kubeconfig_server(config: Any, server: Any) -> dict[str, Any]:
    try:
        return with_server(config, str(server))
    except MetalplaneError as exc:
        raise AnsibleFilterError(f"kubeconfig_server: {exc}") from exc


def _kubeconfig_token(secret: Any, server: Any, name: Any) -> dict[str, Any]:
    try:
        return token_kubeconfig(secret, str(server), str(name))
    except MetalplaneError as exc:
        raise AnsibleFilterError(f"kubeconfig_token: {exc}") from exc
