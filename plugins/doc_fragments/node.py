# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the options shared by the modules that run on a cluster node (``module_utils/_node/args.py``)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  http_proxy:
    description:
      - The site's HTTP proxy for everything the module downloads on the node (package indexes and packages,
        repository keys), set as the environment variables C(http_proxy), C(https_proxy) and C(no_proxy) (and their
        upper-case forms) of the package manager and of the key download.
      - Omitted, the node's own environment and package manager configuration apply.
    type: dict
    suboptions:
      http_proxy:
        description: Proxy URL for C(http://) downloads. May carry credentials; never logged or returned.
        type: str
      https_proxy:
        description: Proxy URL for C(https://) downloads. May carry credentials; never logged or returned.
        type: str
      no_proxy:
        description: Comma-separated hosts, domains and CIDRs reached without the proxy.
        type: str
"""
