"""The Modelplane control-plane emulator (``lab.modelplane.server``), its CRDs generated from Modelplane's XRDs."""
