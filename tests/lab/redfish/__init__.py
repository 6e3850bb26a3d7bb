"""The Redfish BMC emulator (``lab.redfish.server``): iDRAC8/iDRAC9/generic personalities, resource tree, faults."""
