"""Small incremental epochs computed in process (DuckDB over Arrow) instead of in Spark:
:mod:`.epoch` (the operators' rules), :mod:`.expressions` (Spark SQL that DuckDB computes
alike; its types in :mod:`.sql_types`, Spark's division in :mod:`.division`), :mod:`.spark_hash` (Spark's bucket hash on the driver)."""
