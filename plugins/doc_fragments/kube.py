# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection options of the Kubernetes modules (paired with ``module_utils/_kube/args.py``)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file, or the kubeconfig itself as a dictionary.
      - Falls back to E(K8S_AUTH_KUBECONFIG), then to the default kubeconfig (E(KUBECONFIG) or C(~/.kube/config)),
        then to the in-cluster service account when neither O(host) nor a kubeconfig is available.
    type: raw
  context:
    description:
      - The kubeconfig context to use. Falls back to E(K8S_AUTH_CONTEXT), then to the current context.
    type: str
  host:
    description:
      - URL of the Kubernetes API server, overriding the kubeconfig. Falls back to E(K8S_AUTH_HOST).
    type: str
  api_key:
    description:
      - Bearer token for the API server. Falls back to E(K8S_AUTH_API_KEY). Never logged or returned.
    type: str
  validate_certs:
    description:
      - Whether to verify the API server's TLS certificate. Falls back to E(K8S_AUTH_VALIDATE_CERTS)
        (or E(K8S_AUTH_VERIFY_SSL)); when unset, the kubeconfig decides, which verifies unless it says
        C(insecure-skip-tls-verify).
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description:
      - CA bundle that signed the API server certificate. Falls back to E(K8S_AUTH_CA_CERT)
        (or E(K8S_AUTH_SSL_CA_CERT)).
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description:
      - Client certificate for mutual TLS. Falls back to E(K8S_AUTH_CLIENT_CERT) (or E(K8S_AUTH_CERT_FILE)).
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Key of O(client_cert). Falls back to E(K8S_AUTH_CLIENT_KEY) (or E(K8S_AUTH_KEY_FILE)).
    type: path
    aliases: [key_file]
  proxy:
    description:
      - HTTP proxy URL for API requests. Falls back to E(K8S_AUTH_PROXY).
    type: str
  no_proxy:
    description:
      - Comma-separated hosts that bypass O(proxy). Falls back to E(K8S_AUTH_NO_PROXY).
    type: str
requirements:
  - kubernetes >= 24.2.0 (Python client)
notes:
  - The option names and the E(K8S_AUTH_*) variables are those of kubernetes.core, so one AWX/AAP
    credential serves both collections.
"""
