"""Benchmarks of the modules and playbooks against the lab (run as ``python -m bench.<name>`` from ``tests/``)."""
