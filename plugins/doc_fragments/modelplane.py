# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection options of the Modelplane control-plane modules (paired with ``module_utils/_modelplane/args.py``)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path of the kubeconfig of the Modelplane B(control plane) (where the InferenceCluster, the InferenceClasses
        and the kubeconfig Secret live), not of the workload cluster.
      - Falls back to E(MODELPLANE_KUBECONFIG). Deliberately not to E(K8S_AUTH_KUBECONFIG) or E(KUBECONFIG), which
        usually name the workload cluster in the same play. Required.
    type: path
  context:
    description:
      - The kubeconfig context of the control plane. Falls back to E(MODELPLANE_CONTEXT), then to the current
        context.
    type: str
  validate_certs:
    description:
      - Whether to verify the control plane's TLS certificate. When unset, the kubeconfig decides, which verifies
        unless it says C(insecure-skip-tls-verify).
    type: bool
    aliases: [verify_ssl]
requirements:
  - kubernetes >= 24.2.0 (Python client)
  - PyYAML
"""
