"""Column names of the z-set conventions every layer shares.

A z-set is a table of rows plus an integer weight: +n for n copies inserted, −n for n
copies deleted. Changes, state tables and their reads all carry it under one name; state
tables also carry the bucket a row's key hashes to, and "latest" state the epoch that
wrote each row. Nothing here knows how the rows are stored.
"""

from __future__ import annotations

WEIGHT = "__w"
# The hash bucket of a state row's key (a state table's partition column).
BUCKET = "__bucket"
# The refresh epoch that wrote a row of a state table keeping only each key's latest row.
EPOCH = "__epoch"
