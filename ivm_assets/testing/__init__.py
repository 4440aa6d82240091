"""Fault injection for the crash tests: the points the product code calls (``faults``)."""
