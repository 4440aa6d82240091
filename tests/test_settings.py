"""The process's settings (``ivm_assets.settings``): parsed once per combination of the
variables' values, so the list of variables that combination is made of must be whole."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ivm_assets import settings


class _Recording(Mapping[str, str]):
    """An empty environment that remembers every name asked for."""

    def __init__(self) -> None:
        self.asked: set[str] = set()

    def __getitem__(self, name: str) -> str:
        self.asked.add(name)
        raise KeyError(name)

    def get(self, name, default=None):
        self.asked.add(name)
        return default

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def test_every_variable_the_settings_read_is_part_of_what_they_are_cached_by():
    """``current()`` caches on the values of ``_NAMES``: a variable read but not listed
    there would be seen once and then ignored when it changes."""
    env = _Recording()
    settings.current(env)
    assert env.asked and env.asked <= set(settings._NAMES), env.asked - set(settings._NAMES)


def test_a_variable_set_after_the_first_read_is_seen(monkeypatch):
    monkeypatch.delenv(settings.STATE_CACHE_ENV, raising=False)
    default = settings.current().state_cache_bytes
    monkeypatch.setenv(settings.STATE_CACHE_ENV, "3")
    assert settings.current().state_cache_bytes == 3 << 20 != default
    monkeypatch.setenv(settings.STATE_CACHE_ENV, "0")
    assert settings.current().state_cache_bytes == 0
