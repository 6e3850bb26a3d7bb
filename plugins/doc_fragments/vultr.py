# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Documentation of the options every Vultr module shares (``module_utils/_vultr/args.py``)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  api_key:
    description:
      - Vultr API key (Bearer token).
      - If not set, the environment variable E(VULTR_API_KEY) is used.
      - Never returned, logged or shown in a diff.
    type: str
  api_endpoint:
    description:
      - Base URL of the Vultr API, without the C(/v2) suffix (which is appended), as in vultr.cloud.
      - If not set, the environment variable E(VULTR_API_ENDPOINT) is used.
      - Point it at a local emulator for tests, for example V(http://127.0.0.1:8080).
    type: str
    default: https://api.vultr.com
  api_timeout:
    description:
      - Seconds to wait for one HTTP response.
    type: int
    default: 60
  api_retries:
    description:
      - How many times one request is retried.
      - HTTP 429 and 503 are retried for every method and honour C(Retry-After).
      - Other 5xx and lost responses are retried only for idempotent methods (GET, PUT, PATCH, DELETE).
        A create (POST) is never replayed blindly; the module re-reads and checks whether it took effect.
    type: int
    default: 5
  api_retry_max_delay:
    description:
      - Maximum seconds of exponential backoff between two retries (C(Retry-After) is honoured up to 120 s).
    type: int
    default: 12
  validate_certs:
    description:
      - Verify the TLS certificate of O(api_endpoint).
    type: bool
    default: true
  ca_cert:
    description:
      - PEM CA bundle to verify O(api_endpoint) with, instead of the system's (a TLS-inspecting proxy's CA, for
        example). An untrusted certificate fails at once, naming this option.
    type: path
requirements:
  - vultr-python >= 0.2.0
  - requests
"""

    # State-changing modules: deadline of the waits.
    WAIT = r"""
options:
  wait:
    description:
      - Wait until the resource reaches C(active) (or is gone, for O(state=absent)).
      - Waits poll no more than once every 2 seconds, with capped jittered backoff up to 10 seconds.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds to wait before failing; the failure says what was seen last.
    type: int
    default: 3600
"""
