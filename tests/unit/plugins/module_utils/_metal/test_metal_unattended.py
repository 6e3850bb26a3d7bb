"""The unattended configuration renderers and the host settings checks (pure functions, no ISO)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from metal_support import AUTHORIZED_KEY, HOST_KEY, ROOT_HASH, params, settings

from ansible_collections.metalplane.inference.plugins.module_utils._common.errors import InputError
from ansible_collections.metalplane.inference.plugins.module_utils._metal import host_settings, unattended
from ansible_collections.metalplane.inference.plugins.module_utils._metal.cpio import read_newc

VOLID = "CentOS-Stream-10-BaseOS-x86_64"


def _all_text(rendered: unattended.Rendered) -> str:
    """Every file the renderer produced, the Debian initrd unpacked."""
    texts = []
    for path, data in rendered.files.items():
        if path == unattended.PRESEED_INITRD:
            texts += [content.decode() for content in read_newc(data).values()]
        else:
            texts.append(data.decode())
    return "\n".join(texts)


def _main_config(rendered: unattended.Rendered) -> str:
    if unattended.PRESEED_INITRD in rendered.files:
        return read_newc(rendered.files[unattended.PRESEED_INITRD])["preseed.cfg"].decode()
    return rendered.files[rendered.config_path].decode()


FAMILY_CASES = [
    # family, settings in the main file, power-off directive, kernel args
    (
        "el",
        [
            "network --device=24:6e:96:0a:1b:2c --bootproto=static --ip=192.168.120.70 --netmask=255.255.255.0 "
            "--gateway=192.168.120.1 --nameserver=192.168.120.1,9.9.9.9 --hostname=r730",
            f"rootpw --iscrypted {ROOT_HASH}",
            "%include /tmp/metalplane-disk.ks",
            "autopart --type=lvm --noswap",
            "kernel-devel\nkernel-headers\ndkms\ngcc\nmake",
            "nfs-utils\niscsi-initiator-utils",
            "repo --name=epel",
        ],
        "\npoweroff\n",
        ("inst.ks=hd:LABEL=CentOS-Stream-10-BaseOS-x86_64:/ks.cfg",),
    ),
    (
        "debian",
        [
            "d-i netcfg/get_ipaddress string 192.168.120.70",
            "d-i netcfg/get_netmask string 255.255.255.0",
            "d-i netcfg/get_gateway string 192.168.120.1",
            "d-i netcfg/get_nameservers string 192.168.120.1 9.9.9.9",
            "d-i netcfg/get_hostname string r730",
            f"d-i passwd/root-password-crypted password {ROOT_HASH}",
            'debconf-set partman-auto/disk "/dev/$disk"',
            "d-i pkgsel/include string openssh-server linux-headers-amd64 dkms gcc make nfs-common open-iscsi",
        ],
        "d-i debian-installer/exit/poweroff boolean true",
        ("auto=true", "priority=critical"),
    ),
    (
        "ubuntu",
        [
            '"macaddress": "24:6e:96:0a:1b:2c"',
            '"192.168.120.70/24"',
            '"via": "192.168.120.1"',
            '"path": "@METALPLANE_DISK@"',
            '"linux-headers-generic"',
            '"open-iscsi"',
            '"ssh_deletekeys": false',
        ],
        '"shutdown": "poweroff"',
        ("autoinstall", "ds=nocloud;s=/cdrom/nocloud/"),
    ),
]


@pytest.mark.parametrize(("family", "expected", "poweroff", "kernel_args"), FAMILY_CASES)
def test_renderer_sets_network_disk_packages_and_poweroff(
    family: str, expected: list[str], poweroff: str, kernel_args: tuple[str, ...]
) -> None:
    rendered = unattended.render(settings(os_family=family), HOST_KEY, VOLID)
    main = _main_config(rendered)
    for fragment in expected:
        assert fragment in main, fragment
    assert poweroff in main
    assert rendered.kernel_edit.add_args == kernel_args
    everything = _all_text(rendered)
    # The shared finish script: keys, pinned host key, marker with cluster and generation.
    assert AUTHORIZED_KEY in everything
    assert HOST_KEY.private.strip() in everything
    assert HOST_KEY.public in everything
    assert "HostKey /etc/ssh/ssh_host_ed25519_key" in everything
    marker = json.dumps({"cluster": "r730-lab", "generation": 3, "hostname": "r730"}, sort_keys=True)
    assert f"cat > /etc/metalplane/provisioned <<'METALPLANE_EOF'\n{marker}\n" in everything
    assert "/dev/sd" not in everything  # the disk is only ever found by identity


def test_ubuntu_user_data_is_cloud_config() -> None:
    rendered = unattended.render(settings(os_family="ubuntu"), HOST_KEY, VOLID)
    text = rendered.files["/nocloud/user-data"].decode()
    assert text.startswith("#cloud-config\n")
    data = json.loads(text.split("\n", 1)[1])["autoinstall"]
    assert data["storage"]["layout"] == {"name": "direct", "match": {"path": "@METALPLANE_DISK@"}}
    assert len(data["early-commands"]) == 1
    assert "/autoinstall.yaml" in data["early-commands"][0]
    assert rendered.files["/nocloud/meta-data"] == b"instance-id: metalplane-r730-3\n"


def test_debian_preseed_lives_in_an_initrd_loaded_after_the_installer_one() -> None:
    rendered = unattended.render(settings(os_family="debian"), HOST_KEY, VOLID)
    assert set(rendered.files) == {"/preseed.img"}
    assert rendered.kernel_edit.extra_initrd == "/preseed.img"
    members = read_newc(rendered.files["/preseed.img"])
    assert sorted(members) == ["metalplane-disk.sh", "metalplane-finish.sh", "metalplane-network.sh", "preseed.cfg"]
    assert "24:6e:96:0a:1b:2c" in members["metalplane-network.sh"].decode()


@pytest.mark.parametrize(
    ("disk", "properties", "wanted"),
    [
        ({"wwn": "0x5000C500A1B2C3D4"}, "ID_WWN ID_WWN_WITH_EXTENSION", "5000c500a1b2c3d4"),
        (
            {"wwn": "naa.600508B1001C4D3E5A6F7B8C9D0E1F20"},
            "ID_WWN ID_WWN_WITH_EXTENSION",
            "600508b1001c4d3e5a6f7b8c9d0e1f20",
        ),
        ({"serial": "S3Z8NB0K123456"}, "ID_SERIAL_SHORT ID_SCSI_SERIAL", "s3z8nb0k123456"),
    ],
)
def test_disk_script_matches_by_identity(disk: dict[str, str], properties: str, wanted: str, tmp_path: Path) -> None:
    script = unattended.disk_script(settings(disk=disk))
    assert f"for key in {properties}; do" in script
    assert f"want='{wanted}'" in script
    path = tmp_path / "disk.sh"
    path.write_text(script)
    assert subprocess.run(["sh", "-n", str(path)], check=False).returncode == 0  # valid POSIX sh


def test_finish_script_is_valid_sh(tmp_path: Path) -> None:
    path = tmp_path / "finish.sh"
    path.write_text(unattended.finish_script(settings(), HOST_KEY))
    assert subprocess.run(["sh", "-n", str(path)], check=False).returncode == 0


@pytest.mark.parametrize(
    ("volume_id", "arg"),
    [("Rocky-10-0-x86_64-dvd", "Rocky-10-0-x86_64-dvd"), ("RHEL 9 x86 64", "RHEL\\x209\\x20x86\\x2064")],
)
def test_kickstart_location_uses_the_volume_id(volume_id: str, arg: str) -> None:
    rendered = unattended.render(settings(), HOST_KEY, volume_id)
    assert rendered.kernel_edit.add_args == (f"inst.ks=hd:LABEL={arg}:/ks.cfg",)
    assert rendered.kernel_edit.remove_args == ("rd.live.check",)


def test_same_inputs_render_the_same_bytes() -> None:
    for family in host_settings.OS_FAMILIES:
        first = unattended.render(settings(os_family=family), HOST_KEY, VOLID).files
        second = unattended.render(settings(os_family=family), HOST_KEY, VOLID).files
        assert first == second


def test_packages_replace_or_extend_the_defaults() -> None:
    assert settings(packages=["vim"], extra_packages=["tmux"]).packages == ("vim", "tmux")
    assert settings(extra_packages=["tmux", "gcc"]).packages == (*host_settings.DEFAULT_PACKAGES["el"], "tmux")


BAD_INPUTS: list[tuple[dict[str, Any], str]] = [
    ({"os_family": "windows"}, "os_family"),
    ({"network": {**params()["network"], "mac": "24:6e:96:0a:1b"}}, "network.mac"),
    ({"network": {**params()["network"], "mac": "not-a-mac"}}, "network.mac"),
    ({"network": {**params()["network"], "address": "192.168.120.0/24"}}, "network.address"),
    ({"network": {**params()["network"], "address": "192.168.120.255/24"}}, "network.address"),
    ({"network": {**params()["network"], "address": "192.168.120.70"}}, "network.address"),
    ({"network": {**params()["network"], "address": "192.168.300.70/24"}}, "network.address"),
    ({"network": {**params()["network"], "gateway": "10.0.0.1"}}, "network.gateway"),
    ({"network": {**params()["network"], "gateway": "192.168.120.70"}}, "network.gateway"),
    ({"network": {**params()["network"], "dns": []}}, "network.dns"),
    ({"network": None}, "network"),
    ({"root_password_hash": "hunter2"}, "root_password_hash"),
    ({"root_password_hash": "$1$salt$Xyz0123456789abcdefghi"}, "root_password_hash"),
    ({"disk": {}}, "disk"),
    ({"disk": None}, "disk"),
    ({"disk": {"wwn": "0x5000c500a1b2c3d4", "serial": "X1"}}, "disk"),
    ({"disk": {"serial": "/dev/sda"}}, "disk.serial"),
    ({"disk": {"wwn": "5000c500"}}, "disk.wwn"),
    ({"disk": {"serial": "abc;rm -rf /"}}, "disk.serial"),
    ({"hostname": "r730_bad"}, "hostname"),
    ({"ssh_authorized_keys": []}, "ssh_authorized_keys"),
    ({"ssh_authorized_keys": ["ssh-ed25519 AAAA' ; reboot"]}, "ssh_authorized_keys[0]"),
    ({"packages": ["gcc; reboot"]}, "packages"),
    ({"cluster_name": "bad name"}, "cluster_name"),
    ({"generation": -1}, "generation"),
    ({"timezone": "UTC; reboot"}, "timezone"),
]


@pytest.mark.parametrize(("overrides", "field"), BAD_INPUTS)
def test_bad_input_names_the_field(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as caught:
        host_settings.host_settings(params(**overrides))
    assert caught.value.field == field
    assert "hunter2" not in caught.value.msg


def test_network_prefix_may_be_given_apart() -> None:
    network = {**params()["network"], "address": "192.168.120.70", "prefix": 24}
    assert str(settings(network=network).network.interface) == "192.168.120.70/24"


@pytest.mark.parametrize(
    "value",
    [
        ROOT_HASH,
        "$5$saltsalt$" + "b" * 43,
        "$y$j9T$F5Jx5fExrKuPp53xLKQ..1$" + "c" * 43,
        "$2b$12$" + "d" * 53,
    ],
)
def test_crypt_hashes_are_accepted(value: str) -> None:
    assert host_settings.validate_root_password_hash(value) == value
