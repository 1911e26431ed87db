"""The compiled helpers: built by the install, loaded, and switched off by MQTOOL_NATIVE=0."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from mqtool import native

ROOT = Path(__file__).resolve().parent.parent


def test_setup_and_loader_list_the_same_helpers():
    text = (ROOT / "setup.py").read_text()
    built = set(re.findall(r'"mqtool\._native\.(\w+)"', text))
    assert built == set(native.HELPERS) | {native.GUARD}


def test_sigbus_guard_loads_even_with_helpers_off(monkeypatch):
    """The guard is a safety net for every reader (tests/test_common_shrink.py): MQTOOL_NATIVE=0 keeps it."""
    monkeypatch.setenv("MQTOOL_NATIVE", "0")
    if native.guard() is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("the SIGBUS guard was not built")
        pytest.skip("the SIGBUS guard was not built")
    monkeypatch.setenv("MQTOOL_SIGBUS_GUARD", "0")
    assert native.guard() is None


@pytest.mark.parametrize("name", native.HELPERS)
def test_helper_loads(name):
    mod = native.load(name)
    if mod is None:
        msg = f"compiled helper {name} not built (no C compiler at install time?)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)   # CI's machine has gcc and the headers: a silent build failure must not pass
        pytest.skip(msg)
    if name == "probe":
        assert mod.abi() == 1


def test_switch_off(monkeypatch):
    monkeypatch.setenv("MQTOOL_NATIVE", "0")
    assert native.load("probe") is None
    assert not any(native.status().values())


def test_version_names_the_helpers(run_cli):
    code, out, _ = run_cli("--version")
    assert code == 0
    assert "compiled helpers:" in out and "CRC-32:" in out
