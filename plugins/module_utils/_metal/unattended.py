# Copyright: metalplane.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render the unattended install configuration for EL (kickstart), Debian (preseed) and Ubuntu (autoinstall).

Why: the three installers take the same facts in three languages, and the parts that must behave the same
(find the target disk by WWN or serial, write the SSH keys, the marker file, power off at the end) are shared
shell scripts, so a fix lands in all three. Each renderer returns the files to add to the ISO and the kernel
arguments every installer boot entry needs (``iso_bootpaths.KernelEdit``).

What the installed system gets, in every family: the host name; a static IPv4 address on the NIC with the given
MAC (gateway, DNS); the OS on the one disk whose WWN or serial matches (other disks untouched, no swap, since
kubeadm refuses swap); root's authorized keys and the hashed root password; the controller's Ed25519 SSH host
key (and no other host key type: sshd is told to use that one); the packages the later roles need; and
``/etc/metalplane/provisioned`` (JSON: cluster, generation, hostname). The installer powers the machine off
when it is done, which the provisioner waits for before it ejects the media and boots from disk.

References: Anaconda kickstart documentation (pykickstart docs/kickstart-docs.rst), the Debian installation
guide appendix B (example-preseed.txt for bookworm), and the Ubuntu autoinstall reference
(canonical/subiquity doc/reference/autoinstall-reference.rst).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .cpio import newc_archive
from .host_settings import HostSettings
from .hostkeys import HostKey
from .iso_bootpaths import KernelEdit

MARKER_PATH = "/etc/metalplane/provisioned"
DISK_PLACEHOLDER = "@METALPLANE_DISK@"  # replaced in /autoinstall.yaml by the Ubuntu early command
KS_PATH = "/ks.cfg"
PRESEED_INITRD = "/preseed.img"  # 8.3 name: ISOLINUX reads ISO9660 names, not Rock Ridge ones
NOCLOUD_DIR = "/nocloud"
# udev properties holding a disk's identity (udevadm info), in the order tried.
DISK_PROPERTIES = {"wwn": ("ID_WWN", "ID_WWN_WITH_EXTENSION"), "serial": ("ID_SERIAL_SHORT", "ID_SCSI_SERIAL")}


@dataclass(frozen=True)
class Rendered:
    """The files to add to the ISO (path -> bytes) and the edit every installer boot entry gets."""

    files: dict[str, bytes]
    kernel_edit: KernelEdit
    config_path: str  # the main configuration file (for the result)


def label_arg(volume_id: str) -> str:
    """A volume ID as dracut's ``hd:LABEL=`` wants it: spaces and slashes written as ``\\x20``/``\\x2f``."""
    return volume_id.strip().replace("/", "\\x2f").replace(" ", "\\x20")


def disk_script(settings: HostSettings) -> str:
    """POSIX sh that prints the kernel name (``sda``) of the one disk with the wanted WWN or serial.

    It runs in the installer (anaconda, debian-installer's busybox, subiquity), where udev knows the disks
    and ``udevadm`` exists; ``lsblk`` does not exist in debian-installer. It fails when not exactly one
    disk matches, so a missing or duplicated identity stops the install instead of wiping another disk.
    """
    properties = " ".join(DISK_PROPERTIES[settings.disk_by])
    return f"""#!/bin/sh
# Print the one disk whose {settings.disk_by} is {settings.disk_id} (from the BMC's storage inventory).
want='{settings.disk_id.lower()}'
found=''
for sys in /sys/block/*; do
  name=${{sys##*/}}
  case $name in loop*|ram*|sr*|fd*|dm-*|md*|zram*|nbd*) continue ;; esac
  props=$(udevadm info --query=property --name="/dev/$name" 2>/dev/null) || continue
  for key in {properties}; do
    value=$(printf '%s\\n' "$props" | sed -n "s/^$key=//p" | head -n 1 | tr 'A-Z' 'a-z')
    value=${{value#0x}}; value=${{value#naa.}}; value=${{value#eui.}}
    if [ -n "$value" ] && [ "$value" = "$want" ]; then found="$found $name"; break; fi
  done
done
set -- $found
if [ "$#" -ne 1 ]; then
  echo "metalplane: expected exactly one disk with {settings.disk_by} $want, found $#:$found" >&2
  exit 1
fi
echo "$1"
"""


def marker(settings: HostSettings) -> str:
    data = {"cluster": settings.cluster_name, "generation": settings.generation, "hostname": settings.hostname}
    return json.dumps(data, sort_keys=True)


def finish_script(settings: HostSettings, host_key: HostKey) -> str:
    """POSIX sh run inside the installed system (chroot) at the end: keys, sshd, host name, marker."""
    keys = "\n".join(settings.authorized_keys)
    return f"""#!/bin/sh
# metalplane.inference: SSH access pinned by the controller, and the provisioned marker.
set -eu
umask 077
echo '{settings.hostname}' > /etc/hostname
echo 'root:{settings.root_password_hash}' | chpasswd -e
mkdir -p /root/.ssh
cat > /root/.ssh/authorized_keys <<'METALPLANE_EOF'
{keys}
METALPLANE_EOF
chmod 700 /root/.ssh
chmod 600 /root/.ssh/authorized_keys
rm -f /etc/ssh/ssh_host_*_key /etc/ssh/ssh_host_*_key.pub
cat > /etc/ssh/ssh_host_ed25519_key <<'METALPLANE_EOF'
{host_key.private.strip()}
METALPLANE_EOF
cat > /etc/ssh/ssh_host_ed25519_key.pub <<'METALPLANE_EOF'
{host_key.public}
METALPLANE_EOF
chmod 600 /etc/ssh/ssh_host_ed25519_key
chmod 644 /etc/ssh/ssh_host_ed25519_key.pub
mkdir -p /etc/ssh/sshd_config.d
umask 022
cat > /etc/ssh/sshd_config.d/00-metalplane.conf <<'METALPLANE_EOF'
# metalplane.inference: only the host key the controller pinned; root by key only.
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
METALPLANE_EOF
mkdir -p {MARKER_PATH.rsplit("/", 1)[0]}
cat > {MARKER_PATH} <<'METALPLANE_EOF'
{marker(settings)}
METALPLANE_EOF
# The NVIDIA driver replaces nouveau: blacklisted here, in the installed system's first initramfs, so its first boot
# never loads nouveau and the driver needs no reboot of its own (one power-on self-test fewer; minutes on a server).
# The same file, byte for byte, as the nvidia_driver role writes.
mkdir -p /etc/modprobe.d
cat > /etc/modprobe.d/blacklist-nouveau.conf <<'METALPLANE_EOF'
# metalplane.inference: the NVIDIA driver cannot load while nouveau holds the GPUs
blacklist nouveau
options nouveau modeset=0
METALPLANE_EOF
chmod 644 /etc/modprobe.d/blacklist-nouveau.conf
if command -v update-initramfs >/dev/null 2>&1; then update-initramfs -u -k all || true
elif command -v dracut >/dev/null 2>&1; then dracut -f --regenerate-all || true; fi
if command -v restorecon >/dev/null 2>&1; then restorecon -R /root/.ssh /etc/ssh /etc/metalplane || true; fi
"""


def _netmask(settings: HostSettings) -> str:
    return str(settings.network.interface.netmask)


# ------------------------------------------------------------------------------------------------
# EL: kickstart


def render_kickstart(settings: HostSettings, host_key: HostKey, volume_id: str) -> Rendered:
    net = settings.network
    epel = (
        "repo --name=epel --metalink=https://mirrors.fedoraproject.org/metalink?repo=epel-$releasever&arch=$basearch\n"
        if settings.el_epel
        else ""
    )
    packages = "\n".join(settings.packages)
    text = f"""# Generated by metalplane.inference boot_iso for {settings.hostname} (cluster {settings.cluster_name}, \
generation {settings.generation}).
text
lang en_US.UTF-8
keyboard us
timezone {settings.timezone} --utc
network --device={net.mac} --bootproto=static --ip={net.interface.ip} --netmask={_netmask(settings)} \
--gateway={net.gateway} --nameserver={",".join(net.dns)} --hostname={settings.hostname} --activate --onboot=yes
rootpw --iscrypted {settings.root_password_hash}
sshkey --username=root "{settings.authorized_keys[0]}"
services --enabled=sshd
skipx
firstboot --disable
{epel}%include /tmp/metalplane-disk.ks

%pre --erroronfail --interpreter=/bin/sh
cat > /tmp/metalplane-find-disk.sh <<'METALPLANE_EOF'
{disk_script(settings)}METALPLANE_EOF
disk=$(sh /tmp/metalplane-find-disk.sh)
cat > /tmp/metalplane-disk.ks <<METALPLANE_EOF
ignoredisk --only-use=$disk
zerombr
clearpart --all --initlabel --drives=$disk
bootloader --boot-drive=$disk
autopart --type=lvm --noswap --nohome
METALPLANE_EOF
%end

%packages
@^minimal-environment
openssh-server
{packages}
%end

%post --erroronfail --interpreter=/bin/sh
{finish_script(settings, host_key)}%end

poweroff
"""
    edit = KernelEdit(add_args=(f"inst.ks=hd:LABEL={label_arg(volume_id)}:{KS_PATH}",), remove_args=("rd.live.check",))
    return Rendered({KS_PATH: text.encode()}, edit, KS_PATH)


# ------------------------------------------------------------------------------------------------
# Debian: preseed in the initrd


def _early_network(settings: HostSettings) -> str:
    return f"""#!/bin/sh
# Bind the static address to the NIC with MAC {settings.network.mac}: netcfg asks by interface name.
for dev in /sys/class/net/*; do
  if [ "$(cat "$dev/address" 2>/dev/null)" = '{settings.network.mac}' ]; then
    debconf-set netcfg/choose_interface "${{dev##*/}}"
    exit 0
  fi
done
echo 'metalplane: no NIC with MAC {settings.network.mac}' >&2
exit 1
"""


def render_preseed(settings: HostSettings, host_key: HostKey) -> Rendered:
    net = settings.network
    text = f"""# Generated by metalplane.inference boot_iso for {settings.hostname} (cluster {settings.cluster_name}, \
generation {settings.generation}).
d-i debian-installer/locale string en_US.UTF-8
d-i keyboard-configuration/xkb-keymap select us
d-i preseed/early_command string sh /metalplane-network.sh
d-i netcfg/enable boolean true
d-i netcfg/disable_autoconfig boolean true
d-i netcfg/get_ipaddress string {net.interface.ip}
d-i netcfg/get_netmask string {_netmask(settings)}
d-i netcfg/get_gateway string {net.gateway}
d-i netcfg/get_nameservers string {" ".join(net.dns)}
d-i netcfg/confirm_static boolean true
d-i netcfg/get_hostname string {settings.hostname.split(".")[0]}
d-i netcfg/get_domain string {settings.hostname.partition(".")[2]}
d-i netcfg/hostname string {settings.hostname.split(".")[0]}
d-i hw-detect/load_firmware boolean true
d-i mirror/country string manual
d-i mirror/http/hostname string {settings.debian_mirror}
d-i mirror/http/directory string /debian
d-i mirror/http/proxy string
d-i passwd/root-login boolean true
d-i passwd/make-user boolean false
d-i passwd/root-password-crypted password {settings.root_password_hash}
d-i clock-setup/utc boolean true
d-i time/zone string {settings.timezone}
d-i clock-setup/ntp boolean true
d-i partman/early_command string disk=$(sh /metalplane-disk.sh) && debconf-set partman-auto/disk "/dev/$disk" \
&& debconf-set grub-installer/bootdev "/dev/$disk"
d-i partman-auto/method string regular
d-i partman-partitioning/default_label string gpt
d-i partman-auto/expert_recipe string metalplane :: \\
    1 1 1 free $iflabel{{ gpt }} $reusemethod{{ }} method{{ biosgrub }} . \\
    538 538 1075 free $iflabel{{ gpt }} $reusemethod{{ }} method{{ efi }} format{{ }} . \\
    2048 10000 -1 ext4 $primary{{ }} $bootable{{ }} method{{ format }} format{{ }} use_filesystem{{ }} \\
    filesystem{{ ext4 }} mountpoint{{ / }} .
d-i partman-auto/choose_recipe select metalplane
d-i partman-basicfilesystems/no_swap boolean false
d-i partman-partitioning/confirm_write_new_label boolean true
d-i partman/choose_partition select finish
d-i partman/confirm boolean true
d-i partman/confirm_nooverwrite boolean true
d-i partman-efi/non_efi_system boolean true
d-i apt-setup/cdrom/set-first boolean false
d-i apt-setup/cdrom/set-next boolean false
d-i apt-setup/cdrom/set-failed boolean false
tasksel tasksel/first multiselect standard, ssh-server
d-i pkgsel/include string openssh-server {" ".join(settings.packages)}
d-i pkgsel/upgrade select none
popularity-contest popularity-contest/participate boolean false
d-i grub-installer/only_debian boolean true
d-i grub-installer/with_other_os boolean false
d-i preseed/late_command string cp /metalplane-finish.sh /target/root/metalplane-finish.sh \
&& in-target sh /root/metalplane-finish.sh && rm -f /target/root/metalplane-finish.sh
d-i cdrom-detect/eject boolean false
d-i finish-install/reboot_in_progress note
d-i debian-installer/exit/poweroff boolean true
"""
    archive = newc_archive(
        {
            "preseed.cfg": text.encode(),
            "metalplane-network.sh": _early_network(settings).encode(),
            "metalplane-disk.sh": disk_script(settings).encode(),
            "metalplane-finish.sh": finish_script(settings, host_key).encode(),
        }
    )
    edit = KernelEdit(add_args=("auto=true", "priority=critical"), extra_initrd=PRESEED_INITRD)
    return Rendered({PRESEED_INITRD: archive}, edit, f"{PRESEED_INITRD}:preseed.cfg")


# ------------------------------------------------------------------------------------------------
# Ubuntu: autoinstall (cloud-init NoCloud data source on the ISO)


def render_autoinstall(settings: HostSettings, host_key: HostKey) -> Rendered:
    net = settings.network
    cdrom_dir = f"/cdrom{NOCLOUD_DIR}"
    autoinstall = {
        "version": 1,
        "interactive-sections": [],
        "locale": "en_US.UTF-8",
        "keyboard": {"layout": "us"},
        "timezone": settings.timezone,
        "refresh-installer": {"update": False},
        "network": {
            "version": 2,
            "ethernets": {
                "metalplane0": {
                    "match": {"macaddress": net.mac},
                    "dhcp4": False,
                    "dhcp6": False,
                    "addresses": [str(net.interface)],
                    "routes": [{"to": "default", "via": str(net.gateway)}],
                    "nameservers": {"addresses": list(net.dns)},
                }
            },
        },
        # The early command writes the disk it found in place of the placeholder; subiquity reads
        # /autoinstall.yaml again after the early commands.
        "early-commands": [
            f'disk=$(sh {cdrom_dir}/metalplane-disk.sh) && sed -i "s|{DISK_PLACEHOLDER}|/dev/$disk|" /autoinstall.yaml'
        ],
        "storage": {"layout": {"name": "direct", "match": {"path": DISK_PLACEHOLDER}}, "swap": {"size": 0}},
        "ssh": {"install-server": True, "allow-pw": False},
        "packages": list(settings.packages),
        "late-commands": [
            f"cp {cdrom_dir}/metalplane-finish.sh /target/root/metalplane-finish.sh",
            "curtin in-target --target=/target -- sh /root/metalplane-finish.sh",
            "rm -f /target/root/metalplane-finish.sh",
        ],
        # First boot: cloud-init must neither replace the pinned host key nor lock root out.
        "user-data": {
            "hostname": settings.hostname.split(".")[0],
            "disable_root": False,
            "ssh_pwauth": False,
            "ssh_deletekeys": False,
            "ssh_genkeytypes": [],
        },
        "shutdown": "poweroff",
    }
    # JSON is YAML: no YAML library needed on the controller, and sorted keys give the same bytes every time.
    user_data = "#cloud-config\n" + json.dumps({"autoinstall": autoinstall}, indent=2, sort_keys=True) + "\n"
    meta_data = f"instance-id: metalplane-{settings.hostname}-{settings.generation}\n"
    files = {
        f"{NOCLOUD_DIR}/user-data": user_data.encode(),
        f"{NOCLOUD_DIR}/meta-data": meta_data.encode(),
        f"{NOCLOUD_DIR}/metalplane-disk.sh": disk_script(settings).encode(),
        f"{NOCLOUD_DIR}/metalplane-finish.sh": finish_script(settings, host_key).encode(),
    }
    edit = KernelEdit(add_args=("autoinstall", f"ds=nocloud;s={cdrom_dir}/"))
    return Rendered(files, edit, f"{NOCLOUD_DIR}/user-data")


def render(settings: HostSettings, host_key: HostKey, volume_id: str) -> Rendered:
    if settings.os_family == "el":
        return render_kickstart(settings, host_key, volume_id)
    if settings.os_family == "debian":
        return render_preseed(settings, host_key)
    return render_autoinstall(settings, host_key)
