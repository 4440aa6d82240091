"""Every module's docstring examples run and hold (as sqlglot's tests/test_docs.py does)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import ivm_assets

MODULES = sorted(m.name for m in pkgutil.walk_packages(ivm_assets.__path__, "ivm_assets."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
