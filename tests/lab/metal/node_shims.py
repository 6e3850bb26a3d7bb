"""The node software's shims (packages, the NVIDIA driver, kubeadm): importing this registers them.

Why a file of imports: each shim family lives in a file of its own and calls ``lab.metal.shims.register``
at import; the host imports this one file, so adding a family is one line here.
"""

from __future__ import annotations

# pylint: disable=unused-import
from lab.metal import (
    driver,  # noqa: F401
    kubeadm,  # noqa: F401
    packages,  # noqa: F401
)
