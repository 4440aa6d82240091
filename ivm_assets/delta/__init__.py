"""All Delta Lake I/O (delta-rs), one module per responsibility.

Reads hand Spark DataFrames to the caller: snapshots are read by Spark's executors from the
table's parquet files (:mod:`~ivm_assets.delta.read`), change feeds by delta-rs; small,
selective reads are made on the driver (:mod:`~ivm_assets.delta.row_groups`). Small writes
(incremental appends, MERGEs) go from Arrow on the driver through delta-rs
(:mod:`~ivm_assets.delta.write`); whole-table writes (full refreshes, compactions) are
parquet files written by Spark's executors, on any store, and committed by delta-rs as add
actions (:mod:`~ivm_assets.delta.staging`), so the driver never holds a whole table. Every
commit a refresh makes is tagged with its epoch and fenced (:mod:`~ivm_assets.delta.commit`).

- :mod:`~ivm_assets.delta.handles`: opening tables, the handles kept between refreshes
- :mod:`~ivm_assets.delta.log`: commit files, their operations and metrics, app transactions
- :mod:`~ivm_assets.delta.commit`: the :class:`~ivm_assets.delta.commit.Epoch` a commit
  belongs to, fenced commits
- :mod:`~ivm_assets.delta.snapshot`: a version's data files and what the log says of them
- :mod:`~ivm_assets.delta.read`, :mod:`~ivm_assets.delta.row_groups`: reads
- :mod:`~ivm_assets.delta.write`, :mod:`~ivm_assets.delta.staging`: writes
- :mod:`~ivm_assets.delta.maintenance`: compactions, log cleanup, dropped state tables
- :mod:`~ivm_assets.delta.properties`: the table properties ivm sets
- :mod:`~ivm_assets.delta.storage`: stores and their options;
  :mod:`~ivm_assets.delta.filesystems`: the driver's file access with them;
  :mod:`~ivm_assets.delta.storage_errors`: storage failures told in words;
  :mod:`~ivm_assets.delta.hadoop_mapping`: how Spark's executors reach the stores;
  :mod:`~ivm_assets.delta.executor_io`: Spark's executors reading and writing a table's
  parquet files with pyarrow
- :mod:`~ivm_assets.delta.change_files`, :mod:`~ivm_assets.delta.parquet_cache`: large change
  ranges' files, decoded state files kept between refreshes;
  :mod:`~ivm_assets.delta.key_index`: a state file's rows indexed by their integer key
"""
