"""The Vultr API v2 (VKE) emulator (``lab.vultr.server``): state, faults, the overlay contract, the workload twin."""
