"""Version ordering as dpkg and rpm define it, and version prefixes (pins) matched by whole components.

The expected orderings are those of deb-version(7) and rpm's own rpmvercmp test table
(https://github.com/rpm-software-management/rpm/blob/master/tests/rpmvercmp.at).
"""

from __future__ import annotations

import pytest

from ansible_collections.metalplane.inference.plugins.module_utils._node.versions import (
    dpkg_compare,
    matches_prefix,
    rpm_compare,
    split_epoch,
    strip_zero_epoch,
)


def sign(value: int) -> int:
    return (value > 0) - (value < 0)


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("1.34.2-1.1", "1.34.2-1.1", 0),
        ("1.34.10-1.1", "1.34.2-1.1", 1),  # numbers compare as numbers
        ("1.34.2-1.1", "1.34.2-1.2", -1),  # the revision decides last
        ("1.0~rc1-1", "1.0-1", -1),  # a tilde sorts before the end
        ("1:0.1-1", "9.9-9", 1),  # the epoch first
        ("4:12.2.0-3", "12.2.0-3", 1),
        ("1.6.20~ds1-1+b1", "1.6.20~ds1-1", 1),
        ("1.0a", "1.0+", -1),  # letters before other symbols
        ("001.2", "1.2", 0),  # leading zeros ignored
        ("1.0", "1.0-0", 0),  # no revision is revision 0
    ],
)
def test_dpkg_ordering(first: str, second: str, expected: int) -> None:
    assert sign(dpkg_compare(first, second)) == expected
    assert sign(dpkg_compare(second, first)) == -expected


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("1.0", "1.0", 0),
        ("1.0", "2.0", -1),
        ("2.0.1", "2.0", 1),
        ("5.5p1", "5.5p10", -1),
        ("10xyz", "10.1xyz", -1),
        ("xyz10", "xyz10.1", -1),
        ("1.0aa", "1.0a", 1),
        ("10b2", "10a1", 1),
        ("6.0.rc1", "6.0", 1),
        ("1.0~rc1", "1.0", -1),
        ("1.0~rc1", "1.0~rc2", -1),
        ("1.0^", "1.0", 1),
        ("1.0^git1", "1.0.1", -1),
        ("1.0a", "1.0.1", -1),  # letters are older than numbers
        ("1.34.2-150500.1.1", "1.34.10-150500.1.1", -1),
        ("1:1.0-1", "2.0-1", 1),
        ("5.14.0-503.el9", "5.14.0-503.el9", 0),
    ],
)
def test_rpm_ordering(first: str, second: str, expected: int) -> None:
    assert sign(rpm_compare(first, second)) == expected
    assert sign(rpm_compare(second, first)) == -expected


@pytest.mark.parametrize(
    ("version", "prefix", "expected"),
    [
        ("1.34.2-1.1", "1.34.2", True),
        ("1.34.2-1.1", "1.34", True),
        ("1.34.2-150500.1.1", "1.34.2", True),
        ("1.34.20-1.1", "1.34.2", False),  # whole components only
        ("1.340.0-1", "1.34", False),
        ("1.34.2-1.1", "1.34.2-1.1", True),
        ("1.34.2-1.1", "1.34.2-1", True),
        ("1.34.2-1.1", "1.33", False),
        ("1:1.34.2-1", "1.34.2", True),  # the epoch ignored unless pinned
        ("1:1.34.2-1", "2:1.34.2", False),
        ("4:12.2.0-3", "4:12", True),
        ("1.6.20~ds1-1+b1", "1.6.20", True),
    ],
)
def test_version_prefixes(version: str, prefix: str, expected: bool) -> None:
    assert matches_prefix(version, prefix) is expected


@pytest.mark.parametrize(
    ("version", "split", "stripped"),
    [
        ("1.0-1", (0, "1.0-1"), "1.0-1"),
        ("0:1.0-1", (0, "1.0-1"), "1.0-1"),
        ("2:1.0-1", (2, "1.0-1"), "2:1.0-1"),
        ("a:1.0", (0, "a:1.0"), "a:1.0"),  # not an epoch
    ],
)
def test_epochs(version: str, split: tuple[int, str], stripped: str) -> None:
    assert split_epoch(version) == split
    assert strip_zero_epoch(version) == stripped
