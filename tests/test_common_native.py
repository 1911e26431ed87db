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


def test_one_switch_for_every_family(monkeypatch):
    """MQTOOL_NATIVE (auto by default) and native.switched() decide for the RocketMQ core and the Kafka walker
    alike; the innermost switched() wins over the environment, and leaving it restores the environment's say."""
    from mqtool.kafka import records as KR
    from mqtool.rocketmq import layout, nativedump, rebuild, scan, verify

    def helpers():
        return [verify._native_lane(), rebuild.native_lib(), nativedump.helper(), scan.native_decoder(),
                KR._load_native()]

    monkeypatch.delenv("MQTOOL_NATIVE", raising=False)
    if native.load("rmqcore") is None or native.load("kafka") is None:
        pytest.skip("compiled helpers not built")
    assert native.enabled() and all(h is not None for h in helpers())
    for value in ("auto", "1", "on"):
        monkeypatch.setenv("MQTOOL_NATIVE", value)
        assert native.enabled() and layout.native_core() is not None
    with native.switched(False):
        assert not native.enabled() and all(h is None for h in helpers())
        with native.switched(True):
            assert all(h is not None for h in helpers())
        assert all(h is None for h in helpers())
    monkeypatch.setenv("MQTOOL_NATIVE", "off")
    assert all(h is None for h in helpers())
    with native.switched(True):
        assert all(h is not None for h in helpers())
