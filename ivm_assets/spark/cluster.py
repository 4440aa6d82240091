"""Where Spark's executors run, and what follows from it.

With a local master (``local[*]``, ``local-cluster[…]``) the executors share the driver's host:
its folders, its disk. With a cluster master (``spark://``, ``yarn``, ``k8s://``) they run on
other hosts, where a local-folder warehouse is another, unrelated folder: executors would
write a full build's files to their own disks, and the driver would commit the few it finds
as the whole table, a silently partial view. So such a project is refused before anything is
written (:func:`check_reachable`), unless its settings say every executor sees the same path
(``spark: {shared_filesystem: true}``: one host, or a shared mount).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from ivm_assets.errors import ConfigError
from ivm_assets.uris import is_local

_masters: dict[int, str] = {}  # id(session) -> its master (a Connect server is asked once)


def is_local_master(master: str) -> bool:
    """Whether executors of ``master`` run on the driver's host (``local``, ``local[4]``,
    ``local-cluster[2,1,1024]``)."""
    return master.strip().lower().startswith("local")


def master_of(spark: SparkSession) -> str:
    """The master ``spark`` runs on; of a Spark Connect session, its server's."""
    found = _masters.get(id(spark))
    if found is None:
        if type(spark).__module__.startswith("pyspark.sql.connect"):
            found = spark.conf.get("spark.master", "local[*]") or "local[*]"
        else:
            found = spark.sparkContext.master
        _masters[id(spark)] = found
    return found


def check_reachable(master: str, locations: Mapping[str, str], *, shared_filesystem: bool, settings: str) -> None:
    """Refuse local-folder ``locations`` (what -> URI) that executors of a cluster ``master``
    cannot see, unless ``shared_filesystem`` says they can; ``settings`` names where that is set."""
    if shared_filesystem or is_local_master(master):
        return
    local = [f"{what} ({uri})" for what, uri in locations.items() if is_local(uri)]
    if local:
        raise ConfigError(
            f"Spark runs on the cluster {master}, whose executors cannot see this machine's folders, but "
            f"{', '.join(local)} {'is a local folder' if len(local) == 1 else 'are local folders'}: executors would write "
            "and read files on their own disks. Put the warehouse and the sources on object storage (s3://, abfss://, gs://), "
            f"or, if every executor sees these folders at the same path (one host, or a shared mount), set "
            f"`shared_filesystem: true` under `spark:` in {settings}. Nothing was written."
        )


def keep_on_executors(df: DataFrame) -> DataFrame:
    """``df`` computed once and kept on the executors for the steps that read it again.

    A local checkpoint cuts the plan's lineage (later plans stay small), but its blocks exist
    only on the executor that computed them: on a cluster, an executor lost mid-epoch would
    fail the refresh. There the frame is persisted instead (memory, then disk), and a lost
    block is recomputed from its lineage — the epoch's inputs are fixed snapshot files, so
    the recomputation gives the same rows. :func:`release` drops it when the epoch ends.
    """
    if is_local_master(master_of(df.sparkSession)):
        return df.localCheckpoint(eager=True)
    return df.persist(StorageLevel.MEMORY_AND_DISK)


def release(frames: list[DataFrame]) -> None:
    """Unpersist the frames :func:`keep_on_executors` persisted for an epoch that ended."""
    for df in frames:
        if df.storageLevel != StorageLevel.NONE:
            df.unpersist()
    frames.clear()
