"""Simulators shared by several methods (methodkit.core.sim)."""
