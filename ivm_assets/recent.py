"""What a long-lived process keeps between refreshes, least recently used first out.

A warm process (a Dagster code server, a Spark Connect client, the benchmarks) refreshes
the same views again and again, and several things it read are worth keeping for the next
refresh: Delta handles, commit files read from object stores, Parquet footers and decoded
row groups, change ranges several views read, parsed DuckDB statements. Each is kept in a
:class:`Recent`, bounded by its count of entries or by the bytes they hold, and shared by
the threads of concurrent refreshes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Recent(Generic[K, V]):
    """A map of at most ``limit`` (an int, or a function read at every insertion when the
    bound is a setting) in the units of ``size`` (1 per entry unless given, e.g. bytes),
    dropping its least recently used entries past it. Every method holds one lock."""

    def __init__(self, limit: int | Callable[[], int], size: Callable[[V], int] = lambda _: 1) -> None:
        self._limit = limit if callable(limit) else (lambda: limit)
        self._size = size
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()  # with its size when kept
        self._total = 0
        self._lock = threading.Lock()

    def total(self) -> int:
        """What the entries held add up to, in ``size``'s units."""
        return self._total

    def get(self, key: K) -> V | None:
        """The value under ``key`` (now the most recently used), or None."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[0]

    def __contains__(self, key: K) -> bool:
        with self._lock:
            return key in self._entries

    def put(self, key: K, value: V, *, over: Callable[[V], bool] = lambda _: True) -> bool:
        """Keep ``value`` under ``key``, unless what is held there should stay (``over``
        of it is false) or ``value`` alone is past the limit; then drop the least recently
        used entries until the rest fits. Whether it was kept."""
        size, limit = self._size(value), self._limit()
        if size > limit:
            return False
        with self._lock:
            held = self._entries.get(key)
            if held is not None:
                if not over(held[0]):
                    return False
                del self._entries[key]
                self._total -= held[1]
            self._entries[key] = (value, size)
            self._total += size
            while self._total > limit:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._total -= dropped
            return True

    def take(self, key: K, when: Callable[[V], bool] = lambda _: True) -> V | None:
        """Remove and return the value under ``key`` if ``when`` of it holds, else None."""
        with self._lock:
            found = self._entries.get(key)
            if found is None or not when(found[0]):
                return None
            del self._entries[key]
            self._total -= found[1]
            return found[0]

    def drop(self, keys: Callable[[K], bool]) -> None:
        """Remove every entry whose key ``keys`` selects."""
        with self._lock:
            for key in [k for k in self._entries if keys(k)]:
                self._total -= self._entries.pop(key)[1]

    def keys(self) -> list[K]:
        """The keys held now, least recently used first."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._total = 0
