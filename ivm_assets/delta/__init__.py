"""All Delta Lake I/O (delta-rs)."""
