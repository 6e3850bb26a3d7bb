# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options every module that runs on a cluster node shares (paired with ``doc_fragments/node.py``).

Why: a bare-metal data centre is often cut off from the internet, so everything a node downloads (packages,
repository keys) goes through the site's HTTP proxy. One spec gives that proxy one name and shape for every
node module, and a play sets it once (``module_defaults`` on the ``node`` action group).
"""

from __future__ import annotations

from typing import Any

# The proxy settings, named as the environment variables every package manager and curl read
# (https://curl.se/docs/manpage.html#ENVIRONMENT; apt's http and https methods read them too, see apt.conf(5)).
PROXY_KEYS = ("http_proxy", "https_proxy", "no_proxy")


def node_argument_spec() -> dict[str, Any]:
    """Options common to the node modules (documented in the ``node`` doc fragment); a fresh dict."""
    return {
        "http_proxy": {
            "type": "dict",
            "options": {
                # A proxy URL may carry credentials (http://user:password@proxy:3128): never logged or returned.
                "http_proxy": {"type": "str", "no_log": True},
                "https_proxy": {"type": "str", "no_log": True},
                "no_proxy": {"type": "str"},
            },
        },
    }
