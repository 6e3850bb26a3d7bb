# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Package version ordering as dpkg and rpm define it, and the "version prefix" a pin is written as.

Why our own: a pin such as ``kubelet=1.34.2`` must pick the newest packaged build of 1.34.2 (``1.34.2-1.1`` on
Debian, ``1.34.2-150500.1.1`` on EL) among those the repositories offer, and must tell an upgrade from a
downgrade (dnf needs ``downgrade`` for the latter). Plain string or tuple comparison gets ``~`` (sorts before
everything, ``1.0~rc1 < 1.0``) and leading zeros wrong, and the node may run neither python-apt nor python-rpm,
so the two algorithms are ported here from their reference implementations.
"""

from __future__ import annotations

import re

# Characters that may follow a version prefix inside a full version: a prefix ends at a component boundary,
# so 1.34 matches 1.34.2-1.1 but not 1.340.0 (epoch ':', upstream '.', revision '-', '+'/'~'/'^' suffixes).
PREFIX_BOUNDARY = frozenset(".-+~:^_")


def split_epoch(version: str) -> tuple[int, str]:
    """``2:1.0-1`` -> ``(2, "1.0-1")``; no epoch is 0 (dpkg and rpm agree)."""
    head, sep, rest = version.partition(":")
    if sep and head.isdigit():
        return int(head), rest
    return 0, version


def strip_zero_epoch(version: str) -> str:
    """``0:1.34.2-1`` -> ``1.34.2-1``: how apt and dnf print a version whose epoch is 0."""
    epoch, rest = split_epoch(version)
    return rest if epoch == 0 else version


# ------------------------------------------------------------------------------------------------ dpkg
def _dpkg_order(char: str) -> int:
    """dpkg's lib/dpkg/version.c ``order()``: '~' before the end, letters before other symbols."""
    if not char or char.isdigit():
        return 0
    if char.isalpha():
        return ord(char)
    if char == "~":
        return -1
    return ord(char) + 256


def _dpkg_verrevcmp(a: str, b: str) -> int:
    """dpkg's ``verrevcmp()`` (https://git.dpkg.org/cgit/dpkg/dpkg.git/tree/lib/dpkg/version.c)."""
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _dpkg_order(a[i] if i < len(a) else "")
            bc = _dpkg_order(b[j] if j < len(b) else "")
            if ac != bc:
                return ac - bc
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and j < len(b) and a[i].isdigit() and b[j].isdigit():
            if not first_diff:
                first_diff = ord(a[i]) - ord(b[j])
            i += 1
            j += 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first_diff:
            return first_diff
    return 0


def dpkg_compare(a: str, b: str) -> int:
    """Negative, zero or positive as Debian version ``a`` sorts before, with or after ``b`` (deb-version(7))."""
    epoch_a, rest_a = split_epoch(a)
    epoch_b, rest_b = split_epoch(b)
    if epoch_a != epoch_b:
        return epoch_a - epoch_b
    upstream_a, _sep, revision_a = rest_a.rpartition("-") if "-" in rest_a else (rest_a, "", "")
    upstream_b, _sep, revision_b = rest_b.rpartition("-") if "-" in rest_b else (rest_b, "", "")
    return _dpkg_verrevcmp(upstream_a, upstream_b) or _dpkg_verrevcmp(revision_a, revision_b)


# ------------------------------------------------------------------------------------------------- rpm
_DIGITS = re.compile(r"\d+")
_LETTERS = re.compile(r"[A-Za-z]+")


def _rpmvercmp(a: str, b: str) -> int:  # noqa: PLR0911, PLR0912 (a port kept close to its source)
    """rpm's ``rpmvercmp()`` (https://github.com/rpm-software-management/rpm/blob/master/rpmio/rpmvercmp.cc)."""
    if a == b:
        return 0
    i = j = 0
    while i < len(a) or j < len(b):
        while i < len(a) and not a[i].isalnum() and a[i] not in "~^":
            i += 1
        while j < len(b) and not b[j].isalnum() and b[j] not in "~^":
            j += 1
        one = a[i] if i < len(a) else ""
        two = b[j] if j < len(b) else ""
        if one == "~" or two == "~":  # a tilde sorts before everything, even the end
            if one != "~":
                return 1
            if two != "~":
                return -1
            i += 1
            j += 1
            continue
        if one == "^" or two == "^":  # a caret sorts after the end, before anything else
            if not one:
                return -1
            if not two:
                return 1
            if one != "^":
                return 1
            if two != "^":
                return -1
            i += 1
            j += 1
            continue
        if not (one and two):
            break
        numeric = one.isdigit()
        pattern = _DIGITS if numeric else _LETTERS
        seg_a = pattern.match(a, i)
        seg_b = pattern.match(b, j)
        if seg_b is None:  # different kinds: a number is newer than letters
            return 1 if numeric else -1
        if seg_a is None:  # cannot happen: ``one`` starts a segment of this kind at ``i``
            raise AssertionError("rpmvercmp: no segment at the start of a run")
        text_a, text_b = seg_a.group(), seg_b.group()
        if numeric:
            text_a, text_b = text_a.lstrip("0"), text_b.lstrip("0")
            if len(text_a) != len(text_b):
                return 1 if len(text_a) > len(text_b) else -1
        if text_a != text_b:
            return 1 if text_a > text_b else -1
        i, j = seg_a.end(), seg_b.end()
    one_left, two_left = i < len(a), j < len(b)
    if not one_left and not two_left:
        return 0
    return -1 if not one_left else 1


def rpm_compare(a: str, b: str) -> int:
    """Negative, zero or positive as ``[epoch:]version-release`` ``a`` sorts before, with or after ``b``."""
    epoch_a, rest_a = split_epoch(a)
    epoch_b, rest_b = split_epoch(b)
    if epoch_a != epoch_b:
        return -1 if epoch_a < epoch_b else 1
    version_a, _sep, release_a = rest_a.rpartition("-") if "-" in rest_a else (rest_a, "", "")
    version_b, _sep, release_b = rest_b.rpartition("-") if "-" in rest_b else (rest_b, "", "")
    return _rpmvercmp(version_a, version_b) or _rpmvercmp(release_a, release_b)


# ----------------------------------------------------------------------------------------------- pins
def matches_prefix(version: str, prefix: str) -> bool:
    """Whether an installed or offered ``version`` satisfies the pin ``prefix`` (whole components only).

    The epoch is ignored unless the prefix names one: ``1.34.2`` matches ``1.34.2-1.1`` and ``1:1.34.2-1.1``,
    ``1.34`` matches ``1.34.2-1.1``, ``1.3`` does not match ``1.34.2-1.1``.
    """
    candidate = version if ":" in prefix else split_epoch(version)[1]
    if candidate == prefix:
        return True
    return candidate.startswith(prefix) and candidate[len(prefix)] in PREFIX_BOUNDARY
