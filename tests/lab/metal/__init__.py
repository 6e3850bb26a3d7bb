"""Simulated bare-metal hosts behind the lab BMCs, reachable over real SSH.

Why a package of its own: a lab BMC (``lab.redfish.server``) only models the management controller. The
collection's bare-metal path also needs the *server* behind it: a machine that boots what the BMC
tells it to boot, installs an OS from the installer ISO it really reads, powers itself off (or
loops) the way the installer's configuration says, and then answers SSH with the host key and
authorized key that configuration carried. ``docs/lab/metal.md`` describes the design.

Modules, one idea each:

- ``iso_reader``: follow an installer ISO's El Torito entry to its boot loader entry, kernel
  command line and the kickstart / preseed / autoinstall it names; parse what the lifecycle needs.
- ``host``: the lifecycle state machine driven by BMC power, boot and media events.
- ``sandbox``: user, mount and PID namespaces with an overlay root per host (its "disk").
- ``shims``: the commands that would touch hardware (reboot, poweroff, modprobe, wipefs, ...),
  recorded and turned into state changes.
- ``sshd``: one asyncssh server per host on its own loopback address (exec channels and SFTP).
- ``fleet``: the hosts of one Redfish lab, wired to its BMC states.
"""
