# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Install pinned packages and their repositories on a cluster node, on the Debian and EL families alike."""

from __future__ import annotations

DOCUMENTATION = r"""
module: node_packages
short_description: Install or remove pinned packages, and the repositories that carry them, on a cluster node
version_added: 0.1.0
description:
  - Runs on the node (use C(become)). Finds the package family from C(/etc/os-release) (C(ID), then C(ID_LIKE)).
    Debian and Ubuntu use C(apt-get) with C(dpkg-query) and C(apt-cache madison); RHEL, CentOS, Rocky, AlmaLinux
    and Fedora use C(dnf) with C(rpm) and C(dnf list --showduplicates). Another OS fails.
  - Writes each of O(repositories) (an apt source list or a dnf C(.repo) file, and its signing key) only when its
    content differs, and refreshes apt's index after writing one.
  - With O(state=present), a package installed at a version that matches its pin (or at any version, unpinned) is
    left alone; otherwise the newest offered version that matches the pin is installed, upgrading or downgrading
    the installed one. When no repository offers a matching version, the index is refreshed once and, if it is
    still missing, the module fails before changing any package, naming the package and the versions it found
    (for Kubernetes, the patch releases of the configured minor).
  - With O(state=absent), removes the listed packages that are installed (at a version matching the pin, when
    pinned). Repositories are still written.
  - The module pins by installing an exact version; it does not hold packages (C(apt-mark hold),
    C(dnf versionlock)), so a later unpinned upgrade on the node may move them.
  - Recommended packages are not installed on Debian (C(--no-install-recommends)).
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes
  - metalplane.inference.node
attributes:
  check_mode:
    support: full
    details:
      - Reads what is installed and offered, downloads repository keys to compare them, and returns the transaction
        that would run. A version that only a repository this task would add carries cannot be looked up before
        it is written; check mode then reports it as an install of the pinned version with a warning.
  diff_mode:
    support: full
    details:
      - Shows the installed version of each listed package before and after, and each repository file's content.
options:
  packages:
    description:
      - Packages, each C(name) or C(name=<version>), where C(<version>) is a version or a prefix of one made of whole
        components (V(kubelet=1.34.2) matches C(1.34.2-1.1) and C(1.34.2-150500.1.1), V(kubelet=1.34) any 1.34
        patch release, not C(1.340)). The epoch is ignored unless the pin names one.
    type: list
    elements: str
    required: true
  state:
    description: V(present) installs (or keeps), V(absent) removes.
    type: str
    choices: [present, absent]
    default: present
  repositories:
    description:
      - Package repositories to configure before anything is looked up.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description:
          - The repository's name, the file name of C(/etc/apt/sources.list.d/<name>.list) or
            C(/etc/yum.repos.d/<name>.repo) and of its key (letters, digits, C(.), C(_), C(-)).
        type: str
        required: true
      url:
        description:
          - On apt, C(<uri>) for a flat repository (suite C(/)), as V(https://pkgs.k8s.io/core:/stable:/v1.34/deb/),
            or C(<uri> <suite> <component>...), as V(https://download.docker.com/linux/debian bookworm stable).
          - On dnf, the C(baseurl), as V(https://pkgs.k8s.io/core:/stable:/v1.34/rpm/).
        type: str
        required: true
      key_url:
        description:
          - The repository's OpenPGP signing key (C(https://), C(http://) or C(file://)), downloaded through
            O(http_proxy). On apt it is kept as C(/etc/apt/keyrings/<name>.asc) (ASCII-armored, read by apt 2.4
            and later) or C(<name>.gpg) (binary) and named by C(signed-by); on dnf it must be ASCII-armored, is kept
            as C(/etc/pki/rpm-gpg/<name>.asc) and named by C(gpgkey).
          - Omitted, apt trusts the keys in its global keyrings and dnf the keys already imported (C(gpgcheck=1)).
        type: str
  update_cache:
    description:
      - Refresh the package index (C(apt-get update), C(dnf makecache)) before looking anything up. The index is
        refreshed anyway after a repository file changed (apt), or when a pinned version is not found.
    type: bool
    default: false
notes:
  - The environment of every package manager call is non-interactive (C(DEBIAN_FRONTEND=noninteractive)) with the
    C locale; an existing configuration file changed on the node is kept on upgrade.
seealso:
  - name: Installing kubeadm (the upstream package repositories)
    description: The pkgs.k8s.io repositories and their keys, per Kubernetes minor release.
    link: https://kubernetes.io/docs/setup/production-environment/tools/kubeadm/install-kubeadm/
"""

EXAMPLES = r"""
- name: Kubernetes packages pinned to the inventory's release, from the upstream repository of its minor
  metalplane.inference.node_packages:
    packages:
      - kubelet=1.34.2
      - kubeadm=1.34.2
      - kubectl=1.34.2
    repositories:
      - name: kubernetes
        url: "https://pkgs.k8s.io/core:/stable:/v1.34/{{ 'deb' if ansible_os_family == 'Debian' else 'rpm' }}/"
        key_url: >-
          https://pkgs.k8s.io/core:/stable:/v1.34/{{ 'deb/Release.key' if ansible_os_family == 'Debian'
          else 'rpm/repodata/repomd.xml.key' }}
    http_proxy:
      https_proxy: http://proxy.dc1.example:3128
      no_proxy: 10.0.0.0/8,.dc1.example
  become: true

- name: The driver's build prerequisites for the running kernel
  metalplane.inference.node_packages:
    packages:
      - "linux-headers-{{ ansible_kernel }}"
      - dkms
      - gcc
      - make
  become: true

- name: Remove the container runtime
  metalplane.inference.node_packages:
    packages: [containerd]
    state: absent
  become: true
"""

RETURN = r"""
family:
  description: The package family found on the node, V(apt) or V(dnf).
  returned: always
  type: str
  sample: apt
installed:
  description:
    - Each listed package's installed version after the run (in check mode, the version that would be installed),
      null when it is not installed.
  returned: always
  type: dict
  sample: {kubelet: 1.34.2-1.1, kubeadm: 1.34.2-1.1}
transaction:
  description: The changes made (or, in check mode, that would be made).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The package.
      type: str
    before:
      description: Its version before, null when it was not installed.
      type: str
    after:
      description: Its version after, null when removed.
      type: str
    action:
      description: V(install), V(upgrade), V(downgrade) or V(remove).
      type: str
  sample: [{name: kubelet, before: null, after: 1.34.2-1.1, action: install}]
repositories:
  description: Each repository's file, key file, and whether either changed.
  returned: always
  type: list
  elements: dict
  sample:
    - name: kubernetes
      path: /etc/apt/sources.list.d/kubernetes.list
      key_path: /etc/apt/keyrings/kubernetes.asc
      changed: true
cache_updated:
  description: Whether the package index was refreshed.
  returned: always
  type: bool
commands:
  description: The package manager calls that carried out the transaction (or would, in check mode).
  returned: always
  type: list
  elements: str
  sample: ["apt-get install -y -q --no-install-recommends --allow-downgrades kubelet=1.34.2-1.1"]
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._node.args import node_argument_spec
from ansible_collections.metalplane.inference.plugins.module_utils._node.packages_run import run_node_packages


def argument_spec() -> dict[str, Any]:
    return {
        **node_argument_spec(),
        "packages": {"type": "list", "elements": "str", "required": True},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "repositories": {
            "type": "list",
            "elements": "dict",
            "default": [],
            "options": {
                "name": {"type": "str", "required": True},
                "url": {"type": "str", "required": True},
                "key_url": {"type": "str", "no_log": False},  # a public key's URL
            },
        },
        "update_cache": {"type": "bool", "default": False},
    }


def main() -> None:
    MetalplaneModule(argument_spec=argument_spec(), supports_check_mode=True).run(run_node_packages)


if __name__ == "__main__":
    main()
