# The real-boot VM lane: a QEMU VM behind the lab's iDRAC8 Redfish emulator boots the Debian
# installer ISO that boot_iso builds. Opt-in and slow; NOT part of `make test`.
# Included from the main Makefile (-include mk/*.mk). Documentation: docs/testing/metal-vm.md
#
#   make test-metal-vm        BIOS and UEFI: the installer starts unattended with the preseed's static
#                             network, then eject, boot order, power off (target: 10 minutes with TCG)
#   make test-metal-vm-full   the whole installation from the Debian mirror, reboot from disk, SSH with
#                             the key, the marker file, teardown (target: 45 minutes with TCG)
#   make metal-vm-deps        install QEMU, qemu-utils and OVMF (root; otherwise it names the command)
#   make metal-vm-installer   fetch the Debian netboot installer the lane's ISO is built from
#
# A missing QEMU fails the target with the install command (it never passes by skipping); under pytest
# alone the lane's tests skip with the same reason.

VENV ?= .venv
METAL_VM_VENV_DEP ?= venv
METAL_VM_INSTALLER ?= $(abspath .build)/metal-vm/installer
# One VM at a time, serially: the lane is sized for a shared two-core machine.
METAL_VM_PYTEST = METALPLANE_VM_LANE_REQUIRED=1 $(VENV)/bin/python -m pytest -p no:randomly -n 0 -rs -v
METAL_VM_PYTEST_ARGS ?=

.PHONY: test-metal-vm test-metal-vm-full metal-vm-deps metal-vm-installer

metal-vm-deps:
	scripts/install-vm-lane.sh

metal-vm-installer:
	scripts/fetch-vm-installer.sh $(METAL_VM_INSTALLER)

test-metal-vm: $(METAL_VM_VENV_DEP) metal-vm-deps metal-vm-installer collection-tree
	$(METAL_VM_PYTEST) tests/metal_vm/test_vm_backend.py tests/metal_vm/test_metal_vm.py $(METAL_VM_PYTEST_ARGS)

test-metal-vm-full: $(METAL_VM_VENV_DEP) metal-vm-deps metal-vm-installer collection-tree
	$(METAL_VM_PYTEST) tests/metal_vm/test_metal_vm_full.py $(METAL_VM_PYTEST_ARGS)
