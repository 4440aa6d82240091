"""Whether a table's URI is a local folder: the one rule both the Delta layer and the Spark
layer (which checks what a cluster's executors can reach) ask, kept below both."""

from __future__ import annotations


def local_path(uri: str) -> str | None:
    """The local path of ``uri`` (a path or ``file://``); None for an object store URI."""
    path = uri.removeprefix("file://")
    return None if "://" in path else path


def is_local(uri: str) -> bool:
    return local_path(uri) is not None
