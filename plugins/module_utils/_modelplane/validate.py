# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Input checks shared by the Modelplane object builders; each failure names the offending field.

Why: the XRD schemas only run on the control plane, and their CEL rules only on a real API server.
Checking the same limits here lets the preflight reject a bad inventory before anything is
created, with a message that points at the inventory key instead of a server-side 422.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError

# RFC 1123 label (Kubernetes names of most objects, and the label values Modelplane derives).
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# RFC 1123 subdomain (Secret and cluster-scoped object names).
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Kubernetes label value / name part of a qualified key.
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# Secret data keys.
_DATA_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# A Kubernetes resource.Quantity in canonical-ish form ("46068Mi", "80Gi", "1.5", "1e3").
_QUANTITY = re.compile(r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")
# Semantic Versioning 2.0.0, which DRA version attributes must be.
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
_NUMERIC_VERSION = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$")

DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
LABEL_PREFIX_MAX = 253
# XRD limits on typed attribute values and quantities.
ATTRIBUTE_STRING_MAX = 253
ATTRIBUTE_VERSION_MAX = 32
QUANTITY_MAX = 32
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def mapping(field: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(field, f"must be a mapping, got {type(value).__name__}")
    return value


def known_keys(field: str, value: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """Reject keys the schema does not have: the API server would prune them silently."""
    unknown = sorted(str(k) for k in set(value) - set(allowed))
    if unknown:
        raise InputError(field, f"unknown keys {unknown}; allowed: {sorted(allowed)}")


def string(field: str, value: Any, *, min_length: int = 1, max_length: int | None = None) -> str:
    if not isinstance(value, str):
        raise InputError(field, f"must be a string, got {type(value).__name__}")
    if len(value) < min_length:
        raise InputError(field, "must not be empty" if min_length == 1 else f"must have at least {min_length} chars")
    if max_length is not None and len(value) > max_length:
        raise InputError(field, f"must be at most {max_length} characters, got {len(value)}")
    return value


def integer(field: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(field, f"must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise InputError(field, f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise InputError(field, f"must be at most {maximum}, got {value}")
    return value


def dns_label(field: str, value: Any, *, max_length: int = DNS_LABEL_MAX) -> str:
    text = string(field, value, max_length=max_length)
    if not _DNS_LABEL.match(text):
        raise InputError(field, f"{text!r} is not a DNS label (lower-case letters, digits and '-')")
    return text


def dns_subdomain(field: str, value: Any) -> str:
    text = string(field, value, max_length=DNS_SUBDOMAIN_MAX)
    if not _DNS_SUBDOMAIN.match(text):
        raise InputError(field, f"{text!r} is not a DNS subdomain (lower-case letters, digits, '-' and '.')")
    return text


def label_value(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InputError(field, f"label values are strings, got {type(value).__name__} (quote it)")
    if len(value) > LABEL_VALUE_MAX or not _LABEL_VALUE.match(value):
        raise InputError(field, f"{value!r} is not a label value (at most 63 of A-Z a-z 0-9 - _ .)")
    return value


def label_key(field: str, key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise InputError(field, f"label keys are non-empty strings, got {key!r}")
    prefix, _slash, name = key.rpartition("/")
    if prefix and (len(prefix) > LABEL_PREFIX_MAX or not _DNS_SUBDOMAIN.match(prefix)):
        raise InputError(field, f"label key {key!r}: the prefix must be a DNS subdomain")
    if not name or len(name) > LABEL_VALUE_MAX or not _LABEL_VALUE.match(name):
        raise InputError(field, f"label key {key!r}: the name must be at most 63 of A-Z a-z 0-9 - _ .")
    return key


def labels(field: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    checked = mapping(field, value)
    return {label_key(f"{field}.{k}", k): label_value(f"{field}.{k}", v) for k, v in checked.items()}


def data_key(field: str, value: Any) -> str:
    """A Secret/ConfigMap data key: at most 253 of A-Z a-z 0-9 - _ ."""
    text = string(field, value, max_length=DNS_SUBDOMAIN_MAX)
    if not _DATA_KEY.match(text):
        raise InputError(field, f"{text!r} is not a valid Secret key (A-Z a-z 0-9 - _ .)")
    return text


def quantity(field: str, value: Any) -> str:
    """A Kubernetes quantity string; numbers are accepted and written as strings."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(field, f"must be a Kubernetes quantity such as 46068Mi, got {value!r}")
    text = str(value).strip()
    if not text or len(text) > QUANTITY_MAX or not _QUANTITY.match(text):
        raise InputError(field, f"{text!r} is not a Kubernetes quantity (e.g. 46068Mi, 80Gi)")
    return text


def semver(field: str, value: Any) -> str:
    """A DRA version attribute: numeric "8.9" / "v9" are padded to "8.9.0" / "9.0.0"."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InputError(field, f"must be a semantic version such as 9.0.0, got {value!r}")
    text = str(value).strip()
    numeric = _NUMERIC_VERSION.match(text)
    if numeric:
        text = ".".join(part or "0" for part in numeric.groups())
    if len(text) > ATTRIBUTE_VERSION_MAX or not _SEMVER.match(text):
        raise InputError(field, f"{value!r} is not a semantic version (e.g. 9.0.0)")
    return text
