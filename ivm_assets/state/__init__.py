"""Operator state tables and the per-view progress log of epochs."""
