"""Read what a booting installer did from its serial console and from QEMU's user network: pure, unit-tested.

Why: the VM lane proves things only the installer itself can show - that the loader started the edited entry
with no menu, that debian-installer asked nothing, and which network it configured - and one thing only the
network can show: which address its packets came from. Both are read here from text, so the rules are
tested without QEMU.

The serial console carries, in order: the firmware's and the loader's output, the kernel's messages (the lane's
ISO boots without ``quiet``: ``Kernel command line: ...`` shows the arguments ``boot_iso`` added), then GNU
screen, in which debian-installer runs on a serial console (rootskel's ``S70menu``). The lane switches screen
to its ``log`` window (``Ctrl-A 4``: the installer's own ``tail -f /var/log/syslog``, the same as virtual
console 4 on a screen), and the lane's ISO starts the installer with ``DEBCONF_DEBUG=developer``, so that log
holds cdebconf's protocol trace: every question a component asks (``--> GET netcfg/get_ipaddress``) with the
answer it got (``<-- 0 10.0.2.15``), and every question it wanted to show (``--> INPUT critical ...``, answered
``<-- 0 question will be asked`` when it is really shown, ``<-- 30 question skipped`` when preseeded).

``info usernet`` (QEMU's human monitor) lists the user network's connections with the guest's source address.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

# Terminal control sequences (ECMA-48 CSI, charset selection, OSC titles, screen's window title) and the
# remaining C0 controls other than newline; screen draws with them, the text between them is what counts.
_CSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_TITLE = re.compile(r"\x1bk[^\x1b]*\x1b\\")
_ESC = re.compile(r"\x1b[()#][0-9A-Za-z]|\x1b[=>78DEHMNOZc]")
_C0 = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# A cursor position (screen rewriting a line) starts a new line of text.
_CURSOR = re.compile(r"\x1b\[\d*(?:;\d*)?[Hf]")

# GNU screen's status line in debian-installer (rootskel's /etc/screenrc ``hardstatus``): the window list,
# ``N*name`` being the one shown, e.g. ``(1*installer)  2 shell  3 shell  4- log``.
SCREEN_WINDOWS = re.compile(r"\d[*-]?\s*installer\b.*\d[*-]?\s*log\b")
LOG_WINDOW_SHOWN = re.compile(r"4\*\s*log\b")
KERNEL_COMMAND_LINE = re.compile(r"Kernel command line: (?P<args>.*)")
DEBCONF_ASK = re.compile(r"debconf: --> (?P<verb>GET|INPUT) (?:(?P<priority>\S+) )?(?P<question>\S+/\S+)\s*$")
DEBCONF_REPLY = re.compile(r"debconf: <-- (?P<code>\d+)(?: (?P<value>.*))?$")
MENU_ITEM = re.compile(r"main-menu\[\d+\]: INFO: Menu item '(?P<item>[^']+)' selected")
# cdebconf's INPUT reply when the question is really shown (cdebconf src/commands.c).
SHOWN = "question will be asked"
# The netcfg questions that say which IPv4 network the installer configured (netcfg's templates).
NETWORK_QUESTIONS = {
    "interface": "netcfg/choose_interface",
    "autoconfig_disabled": "netcfg/disable_autoconfig",
    "address": "netcfg/get_ipaddress",
    "netmask": "netcfg/get_netmask",
    "gateway": "netcfg/get_gateway",
    "nameservers": "netcfg/get_nameservers",
}
# A DHCP client run by netcfg logs through log-output as udhcpc or dhclient.
DHCP_CLIENTS = ("udhcpc", "dhclient")
# What boot_iso's Debian early command (plugins/module_utils/_metal/unattended.py, ``_early_network``) prints
# when no NIC has the inventory's boot MAC; the installer logs a preseeded command's output.
# debian-installer's dialog when a preseeded command fails (preseed's ``preseed/command_failed`` template, shown
# by /bin/preseed_command). For ``preseed/early_command`` it comes before GNU screen starts, on the console itself.
COMMAND_FAILED = re.compile(r"Failed to run preseeded command")
NO_NIC = re.compile(r"metalplane: no NIC with MAC (?P<mac>[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5})")
USERNET_ROW = re.compile(
    r"^\s*(?P<proto>TCP|UDP)\[(?P<state>[^\]]*)\]\s+(?P<fd>-?\d+)\s+(?P<src>\S+)\s+(?P<sport>\d+)\s+"
    r"(?P<dst>\S+)\s+(?P<dport>\d+)"
)


def plain_text(serial: str) -> str:
    """The serial console's text without terminal control sequences, one line per line drawn."""
    text = _CURSOR.sub("\n", serial)
    for pattern in (_OSC, _TITLE, _CSI, _ESC):
        text = pattern.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _C0.sub("", text)


def showing_log(text: str) -> bool:
    """Whether screen's last status line says the installer's log window is the one shown."""
    status = [line for line in text.splitlines() if SCREEN_WINDOWS.search(line)]
    return bool(status) and bool(LOG_WINDOW_SHOWN.search(status[-1]))


def kernel_command_line(text: str) -> list[str] | None:
    """The arguments of the last kernel that booted (``Kernel command line:``), or None before one did."""
    found = KERNEL_COMMAND_LINE.findall(text)
    return found[-1].split() if found else None


@dataclass
class InstallerTrace:
    """What the installer's log (cdebconf's trace) says it asked and answered, in order."""

    answers: dict[str, str] = field(default_factory=dict)  # question -> the last value a GET returned
    shown: list[str] = field(default_factory=list)  # questions really displayed: prompts
    menu_items: list[str] = field(default_factory=list)  # main-menu's steps, in order
    dhcp: list[str] = field(default_factory=list)  # log lines of a DHCP client
    missing_nics: list[str] = field(default_factory=list)  # MACs the preseed's early command found no NIC for

    def network(self) -> dict[str, str]:
        return {name: self.answers[q] for name, q in NETWORK_QUESTIONS.items() if q in self.answers}


def installer_trace(text: str) -> InstallerTrace:
    """Pair each ``--> GET``/``--> INPUT`` with the ``<--`` reply that follows it in the log."""
    trace = InstallerTrace()
    pending: tuple[str, str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        ask = DEBCONF_ASK.search(line)
        if ask:
            pending = (ask["verb"], ask["question"])
            continue
        reply = DEBCONF_REPLY.search(line)
        if reply and pending is not None:
            verb, question = pending
            pending = None
            value = (reply["value"] or "").strip()
            if verb == "GET" and reply["code"] == "0":
                trace.answers[question] = value
            elif verb == "INPUT" and reply["code"] == "0" and SHOWN in value:
                trace.shown.append(question)
            continue
        menu = MENU_ITEM.search(line)
        if menu:
            trace.menu_items.append(menu["item"])
        no_nic = NO_NIC.search(line)
        if no_nic and no_nic["mac"].lower() not in trace.missing_nics:
            trace.missing_nics.append(no_nic["mac"].lower())
        if any(f"{client}" in line for client in DHCP_CLIENTS) and "debconf" not in line:
            trace.dhcp.append(line)
    return trace


@dataclass(frozen=True)
class Connection:
    proto: str
    state: str
    source: str
    source_port: int
    destination: str
    destination_port: int


def usernet_connections(monitor_output: str) -> list[Connection]:
    """The guest's connections in ``info usernet`` (host forwards, whose source is the host side, excluded)."""
    rows = []
    for line in monitor_output.splitlines():
        match = USERNET_ROW.match(line)
        if match and "HOST_FORWARD" not in match["state"]:
            rows.append(
                Connection(
                    match["proto"],
                    match["state"],
                    match["src"],
                    int(match["sport"]),
                    match["dst"],
                    int(match["dport"]),
                )
            )
    return rows


# netcfg must have read these for a static configuration; the netmask it may derive without asking.
REQUIRED_NETWORK = ("address", "gateway", "nameservers")


def network_problems(expected: dict[str, str], used: dict[str, str]) -> list[str]:
    """How the network the installer configured differs from the VM's network, one line each."""
    problems = []
    if used.get("autoconfig_disabled", "true").lower() != "true":
        problems.append("the installer did not take the static configuration (netcfg/disable_autoconfig is not true)")
    for name in ("address", "gateway", "nameservers", "netmask"):
        want, got = expected.get(name), used.get(name)
        if want is None:
            continue
        if got is None:
            if name in REQUIRED_NETWORK:
                problems.append(f"the installer never read its {name} (netcfg/{_question(name)})")
        elif got.split() != want.split():
            problems.append(f"the installer used {name} {got}, the VM's network needs {want}")
    return problems


def nic_problems(boot_mac: str, trace: InstallerTrace) -> list[str]:
    """The preseed's boot MAC that matched no NIC of the VM, and the VM's boot NIC's MAC, one line each."""
    return [
        f"the preseed's early command found no NIC with MAC {mac}; the VM's boot NIC is {boot_mac.lower()}"
        for mac in trace.missing_nics
    ]


def mac_problems(preseed_mac: str, boot_mac: str) -> list[str]:
    """The preseed's boot MAC when it is not the VM's boot NIC's (its early command then finds no NIC)."""
    if preseed_mac.lower() == boot_mac.lower():
        return []
    return [
        f"the preseed binds the static address to the NIC with MAC {preseed_mac.lower()}; "
        f"the VM's boot NIC is {boot_mac.lower()}"
    ]


def _question(name: str) -> str:
    return NETWORK_QUESTIONS[name].split("/", 1)[1]


def netmask(prefix: int) -> str:
    return str(ipaddress.IPv4Network(f"0.0.0.0/{prefix}").netmask)
