"""Dagster components of ivm_assets (``defs.yaml`` types)."""
