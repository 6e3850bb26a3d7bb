# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build one bare-metal host's unattended installer ISO on the controller and publish it for its BMC."""

from __future__ import annotations

DOCUMENTATION = r"""
module: boot_iso
short_description: Build a per-host unattended installer ISO from a vendor ISO and publish it for virtual media
version_added: 0.1.0
description:
  - Downloads the vendor installer ISO once into O(cache_dir) and verifies its sha256, then writes O(dest), a copy
    with the host's unattended configuration embedded (kickstart for V(el), preseed in an initrd for V(debian),
    autoinstall for V(ubuntu)) and every boot path edited to start it with no prompt.
  - The boot paths are found from the El Torito catalog (BIOS through GRUB or ISOLINUX, UEFI GRUB from the CD and
    the GRUB configuration inside the El Torito EFI image) and are returned in RV(boot_paths). The volume ID and
    the hybrid MBR/GPT boot records are kept.
  - The same inputs give the same ISO byte for byte, so a re-run reports C(changed=false) and the existing file's
    sha256, and nothing is uploaded again.
  - The host's SSH host key is O(ssh_host_key) or, when omitted, generated on the controller for the claim's
    O(generation) and kept beside O(dest) (a new generation gets a new key). Its public half is returned so the
    controller pins it in known_hosts.
  - O(publish) copies the ISO into a directory the user's web server serves, or starts a built-in HTTP server on
    the controller that serves only this ISO (HEAD and Range requests) until O(state=absent), until the ISO is
    deleted, or until its lifetime ends.
  - O(state=absent) stops that server and deletes the ISO, its published copy and the generated host key; run it
    after the BMC ejected the media, since the ISO holds the host's secrets.
  - Every input is checked before anything is downloaded or written; a bad one fails naming the option.
  - "Runs on the controller (C(delegate_to: localhost)); needs the Python libraries C(pycdlib), C(pyfatfs) and
    C(cryptography) there, and no xorriso."
author: metalplane.inference contributors (@metalplane)
extends_documentation_fragment:
  - metalplane.inference.attributes
attributes:
  check_mode:
    support: full
    details:
      - Builds the ISO into a temporary file to report whether O(dest) would change; nothing is written, no key is
        kept, no server is started. Without the vendor ISO in the cache it reports a change without downloading.
  diff_mode:
    support: none
options:
  state:
    description: V(present) builds (and publishes) the ISO; V(absent) stops the server and deletes the files.
    type: str
    choices: [present, absent]
    default: present
  dest:
    description: Path of the host's ISO on the controller. Its directory also holds the generated host key.
    type: path
    required: true
  iso_url:
    description:
      - The vendor installer ISO, C(https://), C(http://), C(file://) or an absolute path on the controller.
      - EL needs the DVD ISO (its packages are on it); Debian and Ubuntu install packages from their mirrors.
      - Required with O(state=present).
    type: str
  iso_checksum:
    description: The vendor ISO's sha256, V(sha256:<hex>) or the bare hex. Required with O(state=present).
    type: str
  cache_dir:
    description: Where downloaded vendor ISOs are kept, named by their sha256.
    type: path
    default: ~/.cache/metalplane/isos
  os_family:
    description:
      - V(el) (CentOS Stream, RHEL, Rocky, Alma 9 and 10; kickstart), V(debian) (12; preseed),
        V(ubuntu) (24.04; autoinstall). Required with O(state=present).
    type: str
    choices: [el, debian, ubuntu]
  hostname:
    description: The installed system's host name. Required with O(state=present).
    type: str
  network:
    description: The static network of the install NIC. Required with O(state=present).
    type: dict
    suboptions:
      mac:
        description: MAC address of the NIC (from the BMC's inventory); the address is bound to it.
        type: str
        required: true
      address:
        description: IPv4 address with prefix, V(192.168.120.70/24) (or the bare address with O(network.prefix)).
        type: str
        required: true
      prefix:
        description: Prefix length when O(network.address) has none.
        type: int
      gateway:
        description: Default gateway; must lie in the address's subnet.
        type: str
        required: true
      dns:
        description: DNS servers.
        type: list
        elements: str
        required: true
  disk:
    description:
      - The install disk, by a stable identity from the BMC's storage inventory; exactly one of O(disk.wwn) and
        O(disk.serial). Device names (C(/dev/sdX)) are refused. Other disks are left untouched, and the install stops
        when not exactly one disk matches. Required with O(state=present).
    type: dict
    suboptions:
      wwn:
        description: World Wide Name, 16 or 32 hex digits (C(0x), C(naa.), C(eui.) prefixes accepted).
        type: str
      serial:
        description: Serial number as udev reports it (C(ID_SERIAL_SHORT)).
        type: str
  ssh_authorized_keys:
    description: Public keys allowed to log in as root. Required with O(state=present).
    type: list
    elements: str
  ssh_host_key:
    description:
      - The host's Ed25519 SSH host private key (OpenSSH format). Omitted, one is generated for O(generation) and
        kept beside O(dest).
    type: str
  root_password_hash:
    description:
      - The root password as a crypt(3) hash (V($6$...), V($5$...), V($y$...), V($2b$...)), e.g.
        C({{ password | password_hash('sha512') }}). A plain password is refused. Required with O(state=present).
    type: str
  packages:
    description:
      - Packages to install. Omitted, the family's defaults the later roles need (kernel headers or devel matching
        the installed kernel, dkms, gcc, make, NFS client, iSCSI tools); see the docs.
    type: list
    elements: str
  extra_packages:
    description: Packages installed in addition to O(packages).
    type: list
    elements: str
    default: []
  el_epel:
    description: For V(el), add the EPEL repository to the install (dkms is in EPEL; the host then needs HTTPS to
      the Fedora mirrors during the install).
    type: bool
    default: true
  debian_mirror:
    description: For V(debian), the host name of the Debian mirror the installer uses.
    type: str
    default: deb.debian.org
  timezone:
    description: Time zone of the installed system.
    type: str
    default: UTC
  cluster_name:
    description: The cluster the host is installed for; written to C(/etc/metalplane/provisioned).
    type: str
  generation:
    description: The host claim's generation; written to C(/etc/metalplane/provisioned) and naming the host key.
    type: int
  publish:
    description: How the BMC gets the ISO.
    type: dict
    suboptions:
      mode:
        description:
          - V(none) leaves the ISO at O(dest) (publish it yourself, for example with C(ansible.builtin.copy) or
            an upload command, and give the BMC that URL).
          - V(directory) copies it (mode 0640) into O(publish.directory), served by your web server at
            O(publish.base_url).
          - V(server) starts the built-in HTTP server on O(publish.address):O(publish.port).
        type: str
        choices: [none, directory, server]
        default: none
      directory:
        description: Directory your web server serves (O(publish.mode=directory)).
        type: path
      base_url:
        description: URL of O(publish.directory) as the BMC reaches it (O(publish.mode=directory)).
        type: str
      address:
        description: Controller address the built-in server binds, one the BMC reaches (O(publish.mode=server)).
        type: str
      port:
        description: Port of the built-in server.
        type: int
        default: 8080
      lifetime:
        description: Seconds after which the built-in server stops even if nobody stopped it.
        type: int
        default: 7200
  api_timeout:
    description: Seconds per HTTP request while downloading the vendor ISO.
    type: int
    default: 60
  validate_certs:
    description: Verify the TLS certificate of O(iso_url).
    type: bool
    default: true
  ca_cert:
    description: CA bundle to verify O(iso_url) with.
    type: path
notes:
  - The ISO holds the root password hash and the SSH host private key; it is written mode 0600 and served only to
    the URL returned in RV(url) (the built-in server's path carries a random token).
seealso:
  - module: metalplane.inference.redfish_virtual_media
"""

EXAMPLES = r"""
- name: Build and serve the installer ISO for the claimed host
  metalplane.inference.boot_iso:
    dest: /var/lib/metalplane/isos/r730.iso
    iso_url: https://mirror.stream.centos.org/10-stream/BaseOS/x86_64/iso/CentOS-Stream-10-latest-x86_64-dvd1.iso
    iso_checksum: "sha256:{{ centos10_dvd_sha256 }}"
    os_family: el
    hostname: r730
    network: {mac: "24:6e:96:0a:1b:2c", address: 192.168.120.70/24, gateway: 192.168.120.1, dns: [192.168.120.1]}
    disk: {wwn: "0x5000c500a1b2c3d4"}
    ssh_authorized_keys: ["{{ lookup('file', '~/.ssh/id_ed25519.pub') }}"]
    root_password_hash: "{{ vault_root_password | password_hash('sha512', 'r730salt') }}"
    cluster_name: r730
    generation: "{{ claim.generation }}"
    publish: {mode: server, address: 192.168.120.5, port: 8080}
  delegate_to: localhost
  register: iso

- name: Pin the host key the install will have
  ansible.builtin.known_hosts:
    name: 192.168.120.70
    key: "{{ iso.known_hosts_line }}"
  delegate_to: localhost

- name: After eject, stop serving and delete the ISO (it holds the host's secrets)
  metalplane.inference.boot_iso:
    dest: /var/lib/metalplane/isos/r730.iso
    state: absent
  delegate_to: localhost
"""

RETURN = r"""
path:
  description: The host's ISO on the controller.
  returned: always
  type: str
sha256:
  description: sha256 of the ISO (of the existing file when nothing changed).
  returned: when O(state=present) and the vendor ISO is available
  type: str
size:
  description: Size of the ISO in bytes.
  returned: when O(state=present) and the vendor ISO is available
  type: int
url:
  description: URL the BMC mounts (O(publish.mode=directory) or V(server)); V(null) with V(none).
  returned: when O(state=present), not in check mode
  type: str
volume_id:
  description: The ISO's volume ID (kept from the vendor ISO).
  returned: when O(state=present) and the vendor ISO is available
  type: str
boot_paths:
  description:
    - Every boot path found and edited. C(firmware) V(bios) or V(uefi), C(loader) V(grub) or V(isolinux), C(where)
      V(iso) (ISO9660 tree) or V(efi_image) (inside the El Torito EFI image), C(config) the file edited, C(via) the
      stub configurations that hand over to it.
  returned: when O(state=present) and the vendor ISO is available
  type: list
  elements: dict
edited:
  description: Files edited (C(efi_image:) marks those inside the EFI image).
  returned: when O(state=present) and the vendor ISO is available
  type: list
  elements: str
added:
  description: Files added to the ISO (the unattended configuration).
  returned: when O(state=present) and the vendor ISO is available
  type: list
  elements: str
config:
  description: The main configuration file (V(/ks.cfg), V(/preseed.img:preseed.cfg), V(/nocloud/user-data)).
  returned: when O(state=present) and the vendor ISO is available
  type: str
hybrid:
  description: Which hybrid boot records were carried over (MBR, GPT, GRUB's boot addresses).
  returned: when O(state=present) and the vendor ISO is available
  type: dict
ssh_host_public_key:
  description: The installed system's SSH host public key (Ed25519).
  returned: when O(state=present)
  type: str
known_hosts_line:
  description: The known_hosts line for the host's address and key.
  returned: when O(state=present)
  type: str
ssh_host_key_generated:
  description: Whether the host key was generated by this run (a new generation or a first build).
  returned: when O(state=present)
  type: bool
source:
  description: The vendor ISO (C(path) in the cache, C(sha256), C(downloaded) by this run).
  returned: when O(state=present)
  type: dict
server:
  description: The built-in server (C(pid), C(address), C(port), C(lifetime)).
  returned: when O(publish.mode=server)
  type: dict
published:
  description: Path of the copy in O(publish.directory).
  returned: when O(publish.mode=directory)
  type: str
removed:
  description: Files deleted.
  returned: when O(state=absent)
  type: list
  elements: str
server_stopped:
  description: Whether a running built-in server was stopped.
  returned: when O(state=absent)
  type: bool
"""

from typing import Any

from ansible_collections.metalplane.inference.plugins.module_utils._common.module import MetalplaneModule
from ansible_collections.metalplane.inference.plugins.module_utils._metal.boot_iso import run_boot_iso


def argument_spec() -> dict[str, Any]:
    return {
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "dest": {"type": "path", "required": True},
        "iso_url": {"type": "str"},
        "iso_checksum": {"type": "str"},
        "cache_dir": {"type": "path", "default": "~/.cache/metalplane/isos"},
        "os_family": {"type": "str", "choices": ["el", "debian", "ubuntu"]},
        "hostname": {"type": "str"},
        "network": {
            "type": "dict",
            "options": {
                "mac": {"type": "str", "required": True},
                "address": {"type": "str", "required": True},
                "prefix": {"type": "int"},
                "gateway": {"type": "str", "required": True},
                "dns": {"type": "list", "elements": "str", "required": True},
            },
        },
        "disk": {"type": "dict", "options": {"wwn": {"type": "str"}, "serial": {"type": "str"}}},
        "ssh_authorized_keys": {"type": "list", "elements": "str", "no_log": False},
        "ssh_host_key": {"type": "str", "no_log": True},
        "root_password_hash": {"type": "str", "no_log": True},
        "packages": {"type": "list", "elements": "str"},
        "extra_packages": {"type": "list", "elements": "str", "default": []},
        "el_epel": {"type": "bool", "default": True},
        "debian_mirror": {"type": "str", "default": "deb.debian.org"},
        "timezone": {"type": "str", "default": "UTC"},
        "cluster_name": {"type": "str"},
        "generation": {"type": "int"},
        "publish": {
            "type": "dict",
            "options": {
                "mode": {"type": "str", "choices": ["none", "directory", "server"], "default": "none"},
                "directory": {"type": "path"},
                "base_url": {"type": "str"},
                "address": {"type": "str"},
                "port": {"type": "int", "default": 8080},
                "lifetime": {"type": "int", "default": 7200},
            },
        },
        "api_timeout": {"type": "int", "default": 60},
        "validate_certs": {"type": "bool", "default": True},
        "ca_cert": {"type": "path"},
    }


def main() -> None:
    MetalplaneModule(
        argument_spec=argument_spec(),
        supports_check_mode=True,
        required_if=[
            (
                "state",
                "present",
                (
                    "iso_url",
                    "iso_checksum",
                    "os_family",
                    "hostname",
                    "root_password_hash",
                    "ssh_authorized_keys",
                    "cluster_name",
                    "generation",
                ),
            )
        ],
    ).run(run_boot_iso)


if __name__ == "__main__":
    main()
