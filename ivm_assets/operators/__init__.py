"""Incremental operators, one module per family; each documents its rule on changes."""
