# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: vke_cluster_info
short_description: List or get Vultr Kubernetes Engine clusters, with their node pools and nodes
description:
  - Returns VKE clusters (all, or those matching O(label) / O(id)) as the API reports them, with their
    node pools and nodes, and whether each carries this collection's ownership marker (C(owned)).
  - Optionally writes the kubeconfig of the one selected cluster to a file with mode 0600. The kubeconfig
    is never returned. Writing the file is the only change this module can make (reported as C(changed)).
version_added: 0.1.0
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes
  - metalplane.inference.vultr
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  label:
    description:
      - Only clusters with this label.
    type: str
  id:
    description:
      - Only the cluster with this id.
    type: str
  kubeconfig_path:
    description:
      - Write the selected cluster's kubeconfig here (mode 0600). Needs O(label) or O(id) matching exactly
        one cluster.
    type: path
"""

EXAMPLES = r"""
- name: All clusters
  metalplane.inference.vke_cluster_info:
  register: vke

- name: One cluster and its kubeconfig
  metalplane.inference.vke_cluster_info:
    label: inference-prod
    kubeconfig_path: /tmp/inference-prod.kubeconfig
"""

RETURN = r"""
clusters:
  description: The clusters, each with C(node_pools) (and their C(nodes)) and C(owned).
  returned: always
  type: list
  elements: dict
kubeconfig_path:
  description: Where the kubeconfig was written.
  returned: when O(kubeconfig_path) is set
  type: str
api_requests:
  description: API requests made by this task.
  returned: always
  type: dict
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.args import vultr_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.client import VULTR_IMPORT_ERROR
from ansible_collections.metalplane.inference.plugins.module_utils._vultr.info import run_vke_cluster_info


def argument_spec() -> dict[str, Any]:
    return {
        **vultr_argument_spec(),
        "label": {"type": "str"},
        "id": {"type": "str"},
        "kubeconfig_path": {"type": "path"},
    }


def main() -> None:
    module = MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True)
    module.require("vultr-python", VULTR_IMPORT_ERROR)
    module.run(run_vke_cluster_info)


if __name__ == "__main__":
    main()
