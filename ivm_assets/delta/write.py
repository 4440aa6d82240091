"""Writes: an epoch's commits (Arrow from the driver through delta-rs, or files staged by
Spark's executors), bag changes applied by MERGE, and the unfenced edits of source tables
(demo, benchmarks, tests).
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, WriterProperties, write_deltalake
from pyspark.sql import DataFrame

from ivm_assets.delta import parquet_cache, storage, storage_errors
from ivm_assets.delta.commit import Epoch, commit_epoch, made_commit
from ivm_assets.delta.handles import keep_moved, writable
from ivm_assets.delta.key_index import indexable
from ivm_assets.delta.log import commit_actions
from ivm_assets.delta.properties import CDF_ON, new_table_configuration
from ivm_assets.delta.staging import all_nullable, commit_staged, stage_files
from ivm_assets.spark.arrow import to_arrow
from ivm_assets.zset import value_runs


def write(uri: str, data: DataFrame | pa.Table, *, mode: Literal["append", "overwrite"]) -> None:
    """Append or overwrite in one commit, unfenced: edits of source tables (demo, benchmark,
    tests), which ivm only reads."""
    table = data if isinstance(data, pa.Table) else to_arrow(data)
    with storage_errors.failures(uri):
        write_deltalake(
            uri, table, mode=mode, schema_mode="overwrite" if mode == "overwrite" else None, storage_options=storage.options_for(uri)
        )
    made_commit()


def write_epoch(
    uri: str,
    table: pa.Table,
    *,
    epoch: Epoch,
    after: int | None,
    mode: Literal["append", "overwrite"],
    partition_by: list[str] | None = None,
    change_feed: bool = False,
    row_group_rows: int | None = None,
    metadata: dict[str, str] | None = None,
    cache_key: str | None = None,
) -> bool:
    """Commit ``table`` (and ``metadata`` in the commit info) as the epoch's one commit to ``uri``, right after version ``after``
    (None: the commit creates the table). See :func:`~ivm_assets.delta.commit.commit_epoch` for what a lost race does.

    ``row_group_rows`` caps parquet row groups: with rows sorted by key, small row groups
    let readers skip the ones whose key range a lookup does not touch. With ``cache_key``
    (the column the rows are sorted by), the files written are held decoded in
    :mod:`~ivm_assets.delta.parquet_cache` for later lookups.
    """

    def attempt(at: int | None) -> bool:
        write_at(
            uri, table, at, mode=mode, properties=epoch.commit_properties(metadata), partition_by=partition_by,
            change_feed=change_feed, row_group_rows=row_group_rows,
        )
        if cache_key is not None:
            cache_written(uri, 0 if at is None else at + 1, table, partition_by or [], cache_key)
        return True

    return commit_epoch(uri, epoch, after, attempt)


def cache_written(uri: str, version: int, table: pa.Table, partition_by: list[str], key: str) -> None:
    """Hand the files commit ``version`` added to the parquet cache with the rows they were
    written from: ``table``'s rows of each file's partition, in order (a partition written
    as more than one file is left out, as is anything the cache's checks refuse).

    When the key can be indexed, each file is indexed over the rows they all share, whether
    its rows are a run of them (an append sorted by bucket) or interleave with the other
    files' (a build in key order), so nothing is copied out per file. Otherwise a file of
    rows sorted by partition holds a slice of them, and one of interleaved rows a filtered
    copy.

    Held by row group (a key that cannot be indexed), a file's rows must be in the order the
    file has them, which only a ``table`` of one batch promises (see :func:`write_at`)."""
    if len(partition_by) > 1 or parquet_cache.budget_bytes() <= 0:
        return
    ordered = in_one_batch(table)
    root = storage.normalize(uri.removeprefix("file://"))
    by_value: dict[str | None, list[tuple[str, int]]] = {}
    for add in commit_actions(uri, version, "add") or []:
        values = add.get("partitionValues") or {}
        file = (f"{root}/{unquote(add['path'])}", int(add["size"]))
        by_value.setdefault(values.get(partition_by[0]) if partition_by else None, []).append(file)
    single = {value: files[0] for value, files in by_value.items() if len(files) == 1}
    if not partition_by:
        for file in single.values():
            parquet_cache.remember(parquet_cache.footer(*file), table, key, ordered=ordered)
        return
    column = table.column(partition_by[0])
    runs = value_runs(column)
    if indexable(table.schema.field(key).type) and pa.types.is_integer(column.type) and not column.null_count:
        # Every file indexed over the rows they share: one pass over the key for all of
        # them, where indexing each file's slice apart cost ~0.3 ms a file (an append to a
        # state table of 16 buckets writes 16 files).
        if runs:
            parts = {value: np.arange(runs[value][0], sum(runs[value])) for value in single if value in runs}
        else:
            numbers = column.to_numpy()
            parts = {value: np.flatnonzero(numbers == int(value)) for value in single if value is not None}
        files = {value: parquet_cache.footer(*single[value]) for value in parts}
        parquet_cache.remember_parts(files, table.drop_columns(partition_by), key, parts)
        return
    as_text = None
    for value, file in single.items():
        if value in runs:
            rows = table.slice(*runs[value]).drop_columns(partition_by)
        else:
            # The partition column as Delta records its values (text), cast once for every file.
            as_text = pc.cast(column, pa.string()) if as_text is None else as_text
            wanted = pc.is_null(as_text) if value is None else pc.equal(as_text, value)
            rows = table.filter(wanted).drop_columns(partition_by)
        parquet_cache.remember(parquet_cache.footer(*file), rows, key, ordered=ordered)


def apply_bag_change(uri: str, change: pa.Table, *, columns: list[str], epoch: Epoch, after: int) -> bool:
    """Apply a consolidated z-set to a table that stores a bag (duplicates, no key), right
    after version ``after``. See :func:`~ivm_assets.delta.commit.commit_epoch` for what a lost race does.

    ``change`` holds ``columns`` plus ``__ivm_op`` and ``__ivm_copy``: one ``del`` row per
    distinct row value whose multiplicity changes (every stored copy of it is deleted), and
    one ``ins`` row per copy to store afterwards. One MERGE does both, so the table moves
    from its old contents to its new ones in a single commit.
    """
    # Parenthesized: DataFusion binds AND tighter than IS NOT DISTINCT FROM. Rows are matched
    # as z-set rows are told apart (ivm_assets.zset): −0.0 equals 0.0 in DataFusion, but not
    # as text ('-0' against '0'); every NaN is 'NaN'.
    match = " AND ".join(
        f'(t."{c}" IS NOT DISTINCT FROM s."{c}")'
        + (f' AND (CAST(t."{c}" AS VARCHAR) IS NOT DISTINCT FROM CAST(s."{c}" AS VARCHAR))' if pa.types.is_floating(change.schema.field(c).type) else "")
        for c in columns
    )
    insert = {f'"{c}"': f's."{c}"' for c in columns}

    def attempt(at: int | None) -> bool:
        target = writable(uri, at)
        merger = target.merge(
            change,
            predicate=f"(s.__ivm_op = 'del') AND {match}" if columns else "s.__ivm_op = 'del'",
            source_alias="s",
            target_alias="t",
            commit_properties=epoch.commit_properties(),
        )
        metrics = merger.when_matched_delete().when_not_matched_insert(insert, predicate="s.__ivm_op = 'ins'").execute()
        keep_moved(uri, target, at)
        # A MERGE that changes nothing makes no commit.
        return bool(metrics.get("num_target_rows_deleted", 0) or metrics.get("num_target_rows_inserted", 0))

    return commit_epoch(uri, epoch, after, attempt)


def write_output_rows(uri: str, rows: pa.Table, *, epoch: Epoch, after: int) -> bool:
    """Replace every stored row of a bag table by ``rows``, right after version ``after``:
    the one kind of bag change that needs no MERGE (see :func:`apply_bag_change`), when the
    change removes every stored copy.

    Its change data feed is what the MERGE would record: the removed files' rows as
    deletes, ``rows`` as inserts. It is an overwrite *with a predicate* (``true``), which
    change readers take as rows changed, not as the table replaced (see
    :func:`~ivm_assets.engine.changes.unusable_range`), and ``rows`` are cast to the table's
    schema, which the write leaves as it is. delta-rs plans no join for it: a few
    milliseconds, where a MERGE of a few rows takes ~20 ms.
    """

    def attempt(at: int | None) -> bool:
        target = writable(uri, at)
        schema = pa.schema(target.schema().to_arrow())
        write_deltalake(
            target, rows.select(schema.names).cast(schema), mode="overwrite", predicate="true",
            commit_properties=epoch.commit_properties(),
        )
        keep_moved(uri, target, at)
        return True

    return commit_epoch(uri, epoch, after, attempt)


def overwrite_epoch(
    uri: str,
    rows: DataFrame | pa.Table,
    *,
    epoch: Epoch,
    after: int | None,
    partition_by: list[str] | None = None,
    sort_by: list[str] | None = None,
    change_feed: bool = False,
    metadata: dict[str, str] | None = None,
    row_group_rows: int | None = None,
    few: bool = False,
    cache_key: str | None = None,
) -> int:
    """Replace the table's content by ``rows`` (sorted by ``partition_by`` + ``sort_by``) as
    the epoch's one commit, right after version ``after`` (None: create the table). Returns
    the rows written. See :func:`~ivm_assets.delta.commit.commit_epoch` for what a lost race does.

    The table gets files written by Spark's executors (:func:`~ivm_assets.delta.staging.stage_files`, on any store):
    the driver never holds the rows, which a full refresh at scale would not fit. When the
    caller knows the rows are ``few`` (a Spark write job and its file commit protocol cost
    ~0.2 s, more than bringing a few thousand rows to the driver), the rows come to the
    driver as Arrow and delta-rs writes them (``row_group_rows`` caps their row groups).
    Rows already on the driver (an Arrow table) are written that way whatever their number,
    and with ``cache_key`` the files are held decoded for later lookups, as
    :func:`write_epoch` holds them (a build computed in process: its state's first lookups
    then decode nothing, where the second refresh after a build decoded whole files,
    ~1 s for TPC-H Q3 at SF 1).
    """
    partition_by, sort_by = partition_by or [], sort_by or []
    if few or isinstance(rows, pa.Table):
        table = rows if isinstance(rows, pa.Table) else to_arrow(rows)
        # delta-rs keeps the order of each batch's rows (batches may reach a file in any
        # order, see write_at), so rows sorted by key land in every partition's file as
        # ascending runs, one per batch: a build computed in process comes so (TPC-H Q5's
        # 6 M-row lineitem side at SF 1: sorting it again by partition and key took Arrow
        # 1.8 s on one core). tests/delta/test_write_order.py holds delta-rs to it.
        if not (sort_by and in_order(table, sort_by)):
            table = _sorted(table, [*partition_by, *sort_by])
        table = table.cast(all_nullable(table.schema))
        write_epoch(
            uri, table, epoch=epoch, after=after, mode="overwrite", partition_by=partition_by or None,
            change_feed=change_feed, row_group_rows=row_group_rows, metadata=metadata, cache_key=cache_key,
        )
        return table.num_rows
    files = stage_files(uri, rows, partition_by=partition_by, sort_by=sort_by, row_group_rows=row_group_rows)
    commit_staged(uri, files, epoch=epoch, after=after, change_feed=change_feed, metadata=metadata)
    return files.rows


def _sorted(table: pa.Table, columns: list[str]) -> pa.Table:
    return table.sort_by([(c, "ascending") for c in columns]) if columns and table.num_rows > 1 else table


def in_order(table: pa.Table, columns: list[str]) -> bool:
    """Whether ``table``'s rows are already ascending on ``columns`` (no NULLs or NaNs among
    them), told by comparing each row with the next (milliseconds for millions of rows)."""
    if table.num_rows < 2:
        return True
    later = tied = None
    for name in columns:
        column = table.column(name)
        if column.null_count or (pa.types.is_floating(column.type) and pc.any(pc.is_nan(column)).as_py()):
            return False
        before, after = column.slice(0, table.num_rows - 1), column.slice(1)
        try:
            less, equal = pc.less(before, after), pc.equal(before, after)
        except pa.ArrowNotImplementedError:  # a type Arrow does not compare: sort it
            return False
        later = less if later is None else pc.or_(later, pc.and_(tied, less))
        tied = equal if tied is None else pc.and_(tied, equal)
    return bool(pc.all(pc.or_(later, tied)).as_py())


def write_at(
    uri: str,
    table: pa.Table,
    after: int | None,
    *,
    mode: Literal["append", "overwrite"],
    properties: CommitProperties,
    partition_by: list[str] | None = None,
    change_feed: bool = False,
    row_group_rows: int | None = None,
) -> None:
    """One write that lands right after version ``after``; ``after`` None creates the table,
    and fails if someone else created it first.

    delta-rs plans a write of several batches as parallel streams, each partition's writer
    taking batches from all of them as they come: a file holds each batch's rows in order,
    but the batches in any order (200,000 sorted rows in batches of 2,048, partitioned 4
    ways: every file out of order). A state file sorted by key is then a few ascending runs,
    whose row groups still cover narrow key ranges, save one per run. Joining the batches
    into one first would keep the order but copy the rows: a build's join side of 7.6 M
    rows (TPC-H Q5 at SF 1) took 1.0 s and 660 MiB more in one run each, so it is not done."""
    creating = after is None
    target = None if creating else writable(uri, after)
    write_deltalake(
        uri if creating else target,
        table,
        mode="error" if creating else mode,
        partition_by=partition_by,
        writer_properties=WriterProperties(max_row_group_size=row_group_rows) if row_group_rows else None,
        schema_mode="overwrite" if mode == "overwrite" and not creating else None,
        configuration=new_table_configuration(change_feed) if creating else CDF_ON if change_feed else None,
        commit_properties=properties,
        storage_options=storage.options_for(uri) if creating else None,
    )
    if target is not None:
        keep_moved(uri, target, after)


def in_one_batch(table: pa.Table) -> bool:
    """Whether ``table`` reaches delta-rs as one batch, whose order each file keeps (see :func:`write_at`)."""
    return all(column.num_chunks <= 1 for column in table.columns)


def create_table(uri: str, data: pa.Table | pa.RecordBatchReader, *, partition_by: list[str] | None = None) -> None:
    """A new table with the change data feed on (demo and benchmark sources, tests); a
    reader is written as it streams, for tables larger than memory."""
    with storage_errors.failures(uri):
        write_deltalake(uri, data, mode="error", partition_by=partition_by, configuration=CDF_ON, storage_options=storage.options_for(uri))


def delete_rows(uri: str, predicate: str) -> None:
    """Delete the rows matching a DataFusion SQL ``predicate`` (source edits: demo, benchmark, tests)."""
    writable(uri).delete(predicate)


def update_rows(uri: str, *, set_sql: dict[str, str], predicate: str) -> None:
    """Set columns to SQL expressions where ``predicate`` holds (source edits: demo, benchmark, tests)."""
    writable(uri).update(updates=set_sql, predicate=predicate)
