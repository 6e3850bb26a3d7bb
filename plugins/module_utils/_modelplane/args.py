# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection options of the Modelplane modules (paired with ``doc_fragments/modelplane.py``).

Why not the kube options (``_kube/args.py``): those fall back to ``K8S_AUTH_*`` like kubernetes.core,
and in an adoption play those variables name the *workload* cluster. Writing an InferenceCluster
into the workload cluster by accident must not be possible, so the control plane has its own
variables (``MODELPLANE_KUBECONFIG``, ``MODELPLANE_CONTEXT``) and no implicit default kubeconfig.
"""

from __future__ import annotations

from typing import Any

from ansible.module_utils.basic import env_fallback

ENV_KUBECONFIG = "MODELPLANE_KUBECONFIG"
ENV_CONTEXT = "MODELPLANE_CONTEXT"


def modelplane_argument_spec() -> dict[str, Any]:
    """Options common to the Modelplane modules (documented in the ``modelplane`` doc fragment); a fresh dict.

    ``verify_ssl`` is kubernetes.core's name for ``validate_certs`` (kept for compatibility with it,
    as in ``_kube/args.py``), not a leftover of a rename.
    """
    return {
        "kubeconfig": {"type": "path", "fallback": (env_fallback, [ENV_KUBECONFIG])},
        "context": {"type": "str", "fallback": (env_fallback, [ENV_CONTEXT])},
        "validate_certs": {"type": "bool", "aliases": ["verify_ssl"]},
    }
