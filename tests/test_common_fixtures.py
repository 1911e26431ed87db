"""The committed fixtures are exactly what the builder scripts produce (so anyone can regenerate them)."""
from __future__ import annotations

import importlib.util

import pytest

from conftest import FIXTURES


def _files(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("family", ["rocketmq"])
def test_fixture_is_reproducible(family, tmp_path):
    spec = importlib.util.spec_from_file_location(f"build_{family}", FIXTURES / f"build_{family}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.build(tmp_path)
    assert _files(tmp_path) == _files(FIXTURES / family)
