"""Reading a booting installer's serial console and QEMU's user network (``lab.vm.evidence``).

Why: the VM lane's verdicts (no question shown, the static network the preseed named, packets from that
address) come from these parsers; they are checked here on text shaped like the real console (GNU screen's
status line and redraws, cdebconf's trace in the installer's log) and ``info usernet`` rows.
"""

from __future__ import annotations

import pytest

from lab.vm import evidence

STATUS = (  # screen's hardstatus line as it reaches the serial console: colours, then the window list
    "\x1b[H\x1b[7m\x1b[m\x1b[32m\x1b[40m[           \x1b[37m\x1b[31m ({})\x1b[37m  2 shell  3 shell  {}\x1b[32m]\r\n"
)
INSTALLER_SHOWN = STATUS.format("1*installer", "4- log")
LOG_SHOWN = STATUS.format("1-installer", "4*log")


def _log(*lines: str) -> str:
    """Syslog lines as screen's log window draws them (cursor moves between lines)."""
    return "".join(f"\x1b[24;1H{line}\r\n" for line in lines)


GOOD = _log(
    "Dec  4 18:20:01 main-menu[312]: INFO: Menu item 'netcfg' selected",
    "Dec  4 18:20:02 debconf: --> GET netcfg/choose_interface",
    "Dec  4 18:20:02 debconf: <-- 0 enp0s2",
    "Dec  4 18:20:03 debconf: --> GET netcfg/disable_autoconfig",
    "Dec  4 18:20:03 debconf: <-- 0 true",
    "Dec  4 18:20:04 debconf: --> INPUT critical netcfg/get_ipaddress",
    "Dec  4 18:20:04 debconf: <-- 30 question skipped",
    "Dec  4 18:20:04 debconf: --> GET netcfg/get_ipaddress",
    "Dec  4 18:20:04 debconf: <-- 0 10.0.2.15",
    "Dec  4 18:20:05 debconf: --> GET netcfg/get_netmask",
    "Dec  4 18:20:05 debconf: <-- 0 255.255.255.0",
    "Dec  4 18:20:05 debconf: --> GET netcfg/get_gateway",
    "Dec  4 18:20:05 debconf: <-- 0 10.0.2.2",
    "Dec  4 18:20:06 debconf: --> GET netcfg/get_nameservers",
    "Dec  4 18:20:06 debconf: <-- 0 10.0.2.3",
    "Dec  4 18:20:09 main-menu[312]: INFO: Menu item 'choose-mirror' selected",
)
EXPECTED = {"address": "10.0.2.15", "gateway": "10.0.2.2", "nameservers": "10.0.2.3", "netmask": "255.255.255.0"}


def test_plain_text_drops_terminal_control() -> None:
    text = evidence.plain_text(INSTALLER_SHOWN + "\x1b(B\x1b)0Detecting network hardware\x0f ... 100%\r\n")
    assert "(1*installer)  2 shell  3 shell  4- log" in text
    assert "Detecting network hardware ... 100%" in text
    assert "\x1b" not in text


@pytest.mark.parametrize(
    ("serial", "shown"),
    [
        (INSTALLER_SHOWN, False),
        (INSTALLER_SHOWN + LOG_SHOWN, True),
        (LOG_SHOWN + INSTALLER_SHOWN, False),  # the last status line counts
        ("Starting system log daemon: syslogd, klogd.\r\n", False),
    ],
)
def test_log_window_shown(serial: str, shown: bool) -> None:
    assert evidence.showing_log(evidence.plain_text(serial)) is shown


def test_kernel_command_line_is_the_last_kernels() -> None:
    text = (
        "[    0.000000] Kernel command line: BOOT_IMAGE=/install.amd/vmlinuz vga=788 --- console=ttyS0\n"
        "[    0.000000] Kernel command line: BOOT_IMAGE=/install.amd/vmlinuz auto=true priority=critical ---\n"
    )
    assert evidence.kernel_command_line(text) == [
        "BOOT_IMAGE=/install.amd/vmlinuz",
        "auto=true",
        "priority=critical",
        "---",
    ]
    assert evidence.kernel_command_line("ISOLINUX 6.04") is None


def test_trace_pairs_questions_with_answers() -> None:
    trace = evidence.installer_trace(evidence.plain_text(LOG_SHOWN + GOOD))
    assert trace.network() == {
        "interface": "enp0s2",
        "autoconfig_disabled": "true",
        "address": "10.0.2.15",
        "netmask": "255.255.255.0",
        "gateway": "10.0.2.2",
        "nameservers": "10.0.2.3",
    }
    assert trace.shown == []  # INPUT answered "30 question skipped": preseeded, not shown
    assert trace.menu_items == ["netcfg", "choose-mirror"]
    assert trace.dhcp == []
    assert evidence.network_problems(EXPECTED, trace.network()) == []


def test_a_shown_question_is_a_prompt() -> None:
    serial = GOOD + _log(
        "Dec  4 18:20:10 debconf: --> INPUT critical mirror/bad",
        "Dec  4 18:20:10 debconf: <-- 0 question will be asked",
    )
    assert evidence.installer_trace(evidence.plain_text(serial)).shown == ["mirror/bad"]


@pytest.mark.parametrize(
    ("replace", "problem"),
    [
        (
            ("<-- 0 10.0.2.2", "<-- 0 10.0.2.1"),
            "the installer used gateway 10.0.2.1, the VM's network needs 10.0.2.2",
        ),
        (
            ("<-- 0 10.0.2.15", "<-- 0 10.0.2.16"),
            "the installer used address 10.0.2.16, the VM's network needs 10.0.2.15",
        ),
        (("<-- 0 true", "<-- 0 false"), "did not take the static configuration"),
        (("GET netcfg/get_nameservers", "GET netcfg/other"), "never read its nameservers"),
        (("<-- 0 255.255.255.0", "<-- 0 255.255.0.0"), "used netmask 255.255.0.0"),
    ],
)
def test_network_problems_name_the_value_used(replace: tuple[str, str], problem: str) -> None:
    trace = evidence.installer_trace(evidence.plain_text(GOOD.replace(*replace)))
    problems = evidence.network_problems(EXPECTED, trace.network())
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize("question", ["netcfg/get_netmask", "netcfg/disable_autoconfig"])
def test_questions_netcfg_may_not_ask_are_not_problems(question: str) -> None:
    trace = evidence.installer_trace(evidence.plain_text(GOOD.replace(f"GET {question}", "GET netcfg/other")))
    assert evidence.network_problems(EXPECTED, trace.network()) == []


def test_dhcp_client_lines_are_collected() -> None:
    serial = GOOD + _log("Dec  4 18:20:07 udhcpc: sending discover")
    assert evidence.installer_trace(evidence.plain_text(serial)).dhcp == ["Dec  4 18:20:07 udhcpc: sending discover"]


def test_usernet_rows() -> None:
    output = (
        "Hub -1 (net0):\r\n"
        "  Protocol[State]    FD  Source Address  Port   Dest. Address  Port RecvQ SendQ\r\n"
        "  TCP[HOST_FORWARD]  13       127.0.0.1 40022       10.0.2.15    22     0     0\r\n"
        "  TCP[ESTABLISHED]   22       10.0.2.15 51532   203.0.113.80    80     0     0\r\n"
        "  UDP[236 sec]       25       10.0.2.15 45211       10.0.2.3    53     0     0\r\n"
    )
    assert evidence.usernet_connections(output) == [
        evidence.Connection("TCP", "ESTABLISHED", "10.0.2.15", 51532, "203.0.113.80", 80),
        evidence.Connection("UDP", "236 sec", "10.0.2.15", 45211, "10.0.2.3", 53),
    ]


@pytest.mark.parametrize(("prefix", "mask"), [(24, "255.255.255.0"), (16, "255.255.0.0"), (30, "255.255.255.252")])
def test_netmask(prefix: int, mask: str) -> None:
    assert evidence.netmask(prefix) == mask


WRONG_MAC = (
    "the preseed's early command found no NIC with MAC 52:54:00:aa:bb:99; the VM's boot NIC is 52:54:00:aa:bb:01"
)


@pytest.mark.parametrize(
    ("lines", "problems"),
    [
        ((), []),
        (
            ("Dec  4 18:20:01 preseed: metalplane: no NIC with MAC 52:54:00:AA:BB:99",),
            [WRONG_MAC],
        ),
        (  # the installer logs it again when the command is retried: said once
            (
                "Dec  4 18:20:01 preseed: metalplane: no NIC with MAC 52:54:00:aa:bb:99",
                "Dec  4 18:20:09 preseed: metalplane: no NIC with MAC 52:54:00:aa:bb:99",
            ),
            [WRONG_MAC],
        ),
    ],
    ids=["found", "wrong-mac", "logged-twice"],
)
def test_nic_problems_name_both_macs(lines: tuple[str, ...], problems: list[str]) -> None:
    trace = evidence.installer_trace(evidence.plain_text(_log(*lines) + GOOD))
    assert evidence.nic_problems("52:54:00:AA:BB:01", trace) == problems


@pytest.mark.parametrize(
    ("preseed_mac", "problems"),
    [
        ("52:54:00:AA:BB:01", []),
        ("52:54:00:aa:bb:01", []),
        (
            "52:54:00:aa:bb:99",
            [
                "the preseed binds the static address to the NIC with MAC 52:54:00:aa:bb:99; "
                "the VM's boot NIC is 52:54:00:aa:bb:01"
            ],
        ),
    ],
    ids=["same", "same-case", "wrong"],
)
def test_mac_problems(preseed_mac: str, problems: list[str]) -> None:
    assert evidence.mac_problems(preseed_mac, "52:54:00:AA:BB:01") == problems


@pytest.mark.parametrize(
    ("serial", "failed"),
    [
        ("\x1b[5;10H[!!] Failed to run preseeded command\x1b[7;10HExecution of preseeded command", True),
        (GOOD, False),
    ],
    ids=["dialog", "no-dialog"],
)
def test_the_command_failed_dialog_is_seen(serial: str, failed: bool) -> None:
    assert bool(evidence.COMMAND_FAILED.search(evidence.plain_text(serial))) is failed
