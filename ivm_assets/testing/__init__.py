"""Helpers for tests and benchmarks: TPC-H data and refresh batches, fault injection."""
