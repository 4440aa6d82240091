"""Arrow ↔ Spark conversions keep every row."""

from __future__ import annotations

import pyarrow as pa

from ivm_assets.spark.arrow import to_spark


def test_an_empty_chunk_in_the_middle_loses_no_rows(spark):
    """pyspark 4.3's createDataFrame drops the record batches after an empty one; a pyarrow
    dataset read (one batch per file) or a change feed read produces exactly that."""
    table = pa.concat_tables([pa.table({"a": [1, 2]}), pa.table({"a": pa.array([], pa.int64())}), pa.table({"a": [3]})])
    assert table.column("a").num_chunks == 3
    assert sorted(r.a for r in to_spark(spark, table).collect()) == [1, 2, 3]
