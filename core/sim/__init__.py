"""methodkit.core.sim: simulators shared by several methods (highway/: batched highway driving)."""
