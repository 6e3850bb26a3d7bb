# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Known limits of VKE, checked before any request that writes: they are checks, not surprises.

Why each limit:

- **``vpc_only`` fails cluster creation.** Creating a VKE cluster (or node pool) with ``vpc_only:
  true`` is answered with HTTP 500 and nothing usable (Vultr support ticket YTM-97SIL), so the nodes
  keep their public interfaces in practice. Sending it costs a failed create, a cleanup and minutes;
  it is refused up front, naming the ticket, unless the user sets the explicit override
  (``allow_vpc_only`` / ``vke_cluster_allow_vpc_only``) for when Vultr has fixed it. The 5xx
  handling of ``cluster_ops``/``pool_ops`` still explains and cleans up a failure under the override.
- **No GPU fabric between VKE GPU nodes.** VKE nodes are cloud VMs without InfiniBand or RDMA
  between them, so a model is served from one node (tensor parallelism over that node's GPUs only);
  Modelplane's multi-node engines (a Leader with Workers) need a fabric (the ``fabric`` of an
  InferenceCluster pool exists only for EKS, AKS and Nebius, and Modelplane maps none for Vultr).
  A class or deployment asking for more GPUs per node than the pool's nodes have can therefore never
  be served on VKE.
"""

from __future__ import annotations

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

VPC_ONLY_TICKET = "YTM-97SIL"
VPC_ONLY_REASON = (
    "VKE fails cluster and node pool creation with vpc_only: true (HTTP 500, Vultr ticket "
    f"{VPC_ONLY_TICKET}), so nothing is sent; without vpc_only the nodes keep public interfaces (firewall them). "
    "Set the override (allow_vpc_only: true, inventory vke_cluster_allow_vpc_only: true) only once Vultr has "
    "fixed it"
)
NO_FABRIC_REASON = (
    "VKE GPU nodes have no GPU fabric (no InfiniBand or RDMA between nodes), so serving is single-node only: "
    "a replica can use at most the GPUs of one node"
)


def check_vpc_only(vpc_only: bool | None, allow: bool, field: str) -> None:
    """Refuse ``vpc_only`` without the override (raises ``InputError`` naming ``field``)."""
    if vpc_only and not allow:
        raise InputError(field, VPC_ONLY_REASON, details={"ticket": VPC_ONLY_TICKET})


def per_node_problem(wanted: int, per_node: int, pool: str) -> str | None:
    """Why ``wanted`` GPUs per replica cannot be served from pool ``pool`` with ``per_node`` GPUs per node."""
    if wanted <= per_node:
        return None
    return f"needs {wanted} GPUs on one node, but the nodes of pool {pool!r} have {per_node}: {NO_FABRIC_REASON}"
