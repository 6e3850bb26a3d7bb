"""A simulated Metal3 (baremetal-operator + Ironic) for the lab; see docs/testing/metal3-lab.md."""
