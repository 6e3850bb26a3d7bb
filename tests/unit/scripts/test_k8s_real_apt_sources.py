"""``scripts/k8s-real/apt-sources.sh``: the k8s-real build's Debian mirrors come from the machine's apt.

Why: the build used to write a fixed host (deb.debian.org) into its private sources list, which fails
on a site that reaches Debian only through its own mirror. The script reads the mirror from the
machine's apt configuration (one-line ``.list`` files and deb822 ``.sources`` files) and, when it finds
none, fails naming the file to fix instead of falling back to a default host. Each case below is an
apt configuration directory (``K8S_REAL_APT_ETC``) and the sources list or error it must produce.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
SCRIPT = REPO_ROOT / "scripts" / "k8s-real" / "apt-sources.sh"

DEB822_DEBIAN = """\
Types: deb
# a comment inside the stanza
URIs: http://mirror.example.org/debian/
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example.org/debian-security
Suites: bookworm-security
Components: main
"""


def sources_list(main: str, security: str | None) -> list[str]:
    """The ``deb``/``deb-src`` lines the script must print for suite bookworm (comments dropped)."""
    lines = [f"deb {main} bookworm main", f"deb-src {main} bookworm main"]
    if security is not None:
        lines += [f"deb {security} bookworm-security main", f"deb-src {security} bookworm-security main"]
    return lines


# (id, files under the apt directory, extra environment, expected lines or None, words the error names)
CASES: list[tuple[str, dict[str, str], dict[str, str], list[str] | None, list[str]]] = [
    (
        "deb822 .sources",
        {"sources.list.d/debian.sources": DEB822_DEBIAN},
        {},
        sources_list("http://mirror.example.org/debian", "http://mirror.example.org/debian-security"),
        [],
    ),
    (
        "one-line sources.list with options and comments",
        {
            "sources.list": (
                "# deb http://commented.example/debian bookworm main\n"
                "deb [arch=amd64 signed-by=/k.gpg] http://site.example/debian bookworm main contrib\n"
                "deb http://site.example/debian-security/ bookworm-security main # trailing comment\n"
            )
        },
        {},
        sources_list("http://site.example/debian", "http://site.example/debian-security"),
        [],
    ),
    (
        "sources.list wins over sources.list.d; old security layout codename/updates",
        {
            "sources.list": "deb http://first.example/debian trixie main\n",
            "sources.list.d/a.list": "deb http://second.example/debian bookworm main\n",
            "sources.list.d/b.list": "deb http://sec.example/debian-security buster/updates main\n",
        },
        {},
        sources_list("http://first.example/debian", "http://sec.example/debian-security"),
        [],
    ),
    (
        "non-Debian and disabled entries are skipped",
        {
            "sources.list.d/00-ubuntu.list": "deb http://archive.ubuntu.com/ubuntu noble main\n",
            "sources.list.d/10-vendor.list": "deb https://packages.example/apt cloud-sdk-bookworm main\n",
            "sources.list.d/20-off.sources": (
                "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n"
            ),
            "sources.list.d/30-on.sources": (
                "Types: deb-src deb\nURIs: http://on.example/debian\nSuites:\n bookworm\n bookworm-security\n"
            ),
        },
        {},
        sources_list("http://on.example/debian", "http://on.example/debian"),
        [],
    ),
    (
        "explicit mirrors override the machine's",
        {"sources.list.d/debian.sources": DEB822_DEBIAN},
        {"K8S_REAL_DEBIAN_MIRROR": "http://override.example/debian/", "K8S_REAL_DEBIAN_SECURITY_MIRROR": "none"},
        sources_list("http://override.example/debian", None),
        [],
    ),
    (
        "no Debian mirror: fails naming the file to fix",
        {"sources.list.d/ubuntu.sources": "Types: deb\nURIs: http://archive.ubuntu.com/ubuntu\nSuites: noble\n"},
        {},
        None,
        ["no Debian mirror", "sources.list.d/debian.sources", "K8S_REAL_DEBIAN_MIRROR"],
    ),
    (
        "no security mirror: fails rather than leaving security out silently",
        {"sources.list": "deb http://site.example/debian bookworm main\n"},
        {},
        None,
        ["no Debian security mirror", "sources.list.d/debian.sources", "K8S_REAL_DEBIAN_SECURITY_MIRROR"],
    ),
    (
        "empty apt directory",
        {},
        {},
        None,
        ["no Debian mirror", "sources.list.d/debian.sources"],
    ),
]


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("awk") is None, reason="needs bash and awk")
@pytest.mark.parametrize(("files", "env", "expected", "error_words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_apt_sources(
    tmp_path: Path,
    files: dict[str, str],
    env: dict[str, str],
    expected: list[str] | None,
    error_words: list[str],
) -> None:
    """The private sources list names the machine's Debian mirrors, or the script fails and says where to fix."""
    apt_etc = tmp_path / "apt"
    (apt_etc / "sources.list.d").mkdir(parents=True)
    for name, text in files.items():
        (apt_etc / name).write_text(text, encoding="utf-8")
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("K8S_REAL_")}

    result = subprocess.run(
        ["bash", str(SCRIPT), "bookworm"],
        env={**clean_env, "K8S_REAL_APT_ETC": str(apt_etc), **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )

    if expected is None:
        assert result.returncode != 0
        assert result.stdout == ""
        for word in error_words:
            assert word in result.stderr
        assert "deb.debian.org" not in result.stderr + result.stdout
    else:
        assert result.returncode == 0, result.stderr
        assert [line for line in result.stdout.splitlines() if not line.startswith("#")] == expected
