# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names and values Modelplane hard-codes, so the builders and the roles agree on them.

Why: every value here is fixed by Modelplane's code or by this collection's storage role, not a
matter of taste; a typo in any of them makes an adoption hang with no error (source:
https://github.com/modelplaneai/modelplane v0.3.1 at ``90ba117d``: the XRDs of group
``modelplane.ai`` and the function ``functions/compose-inference-cluster``).
"""

from __future__ import annotations

# Every user kind is served as modelplane.ai/v1alpha1 (Crossplane v2 XRDs).
API_VERSION = "modelplane.ai/v1alpha1"
KIND_INFERENCE_CLASS = "InferenceClass"
KIND_INFERENCE_CLUSTER = "InferenceCluster"
KIND_INFERENCE_GATEWAY = "InferenceGateway"
KIND_MODEL_SERVICE = "ModelService"
KIND_MODEL_DEPLOYMENT = "ModelDeployment"
KIND_MODEL_CACHE = "ModelCache"
KIND_MODEL_REPLICA = "ModelReplica"
# compose-model-service matches the gateway by name: one InferenceGateway per control plane, named so.
GATEWAY_NAME = "default"
# The label Modelplane puts on every ModelReplica (and ModelEndpoint) of a deployment, which a
# ModelService's endpoint selector matches; and the one naming the cluster a replica runs on.
DEPLOYMENT_LABEL = "modelplane.ai/deployment"
REPLICA_CLUSTER_LABEL = "modelplane.ai/cluster"

# compose-inference-cluster hard-codes the namespace of the kubeconfig Secret: secretRef has no
# namespace field, so a Secret anywhere else is never found.
CONTROL_PLANE_NAMESPACE = "modelplane-system"
# secretRef.key defaults to this in the XRD; we always write it explicitly.
KUBECONFIG_KEY = "kubeconfig"

# The NVIDIA DRA driver's name, which is also the DeviceClass its chart creates and the domain of
# the attributes/capacity a nodeSelector reads.
NVIDIA_DRA_DRIVER = "gpu.nvidia.com"
# The device name the Modelplane examples use for GPUs; ModelDeployment selectors name it.
GPU_DEVICE_NAME = "gpu"

# The RWX class the longhorn_rwx role creates; Existing clusters have no default cache class.
RWX_STORAGE_CLASS = "modelplane-rwx-longhorn"

# The node label Modelplane pins replicas with; its value is nodePools[].name.
POOL_LABEL = "modelplane.ai/pool"

# Marks every object this collection writes, so un-adopt only deletes what it created.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "metalplane.inference"
# On the kubeconfig Secret: the InferenceCluster it belongs to. On the InferenceCluster itself: its own
# name, a label no other cluster carries, which a ModelDeployment's clusterSelector pins a replica with.
CLUSTER_LABEL = "metalplane.inference/cluster"

# XRD limits (inferenceclasses.yaml / inferenceclusters.yaml); the builders check them so a bad
# inventory fails in preflight instead of at the API server.
MAX_DEVICES = 16
MAX_DEVICE_COUNT = 64
MAX_ATTRIBUTES = 32
MAX_CAPACITIES = 32
MAX_NODE_POOLS = 8
MAX_POOL_NAME = 40
# The VultrCluster XRD (vultrclusters.yaml) is stricter than InferenceCluster: each node count is
# 1..1000 and minNodeCount needs maxNodeCount. We apply it to every pool, because a VKE pool always
# keeps at least one node and the same inventory may later be adopted as source: Vultr.
MIN_POOL_NODES = 1
MAX_POOL_NODES = 1000
