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


def test_byte_find_answers_as_bytes_find(tmp_path):
    """native.byte_find (the compiled memchr search the carvers use) gives bytes.find's answer: needles of 0-5
    bytes, hits at the edges of [start, end), bounds past the end, repeated first bytes, on bytes and on a
    read-only map; and the switch turns it back into bytes.find."""
    import mmap
    import random

    find = native.byte_find()
    if find is native._py_find:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("compiled helper probe not built")
        pytest.skip("compiled helper probe not built")
    rng = random.Random(11)
    data = bytes(rng.choice(b"\xda\xa3 \x01LMQ") for _ in range(4000))
    needles = [b"", b"\xda", b"\xda\xa3", b"\xda\xa3 ", b"LMQ\x01", b"\xda\xda\xa3 L", b"zz"]
    for sub in needles:
        for _ in range(400):
            lo, hi = rng.randrange(0, 4100), rng.randrange(0, 4100)
            assert find(data, sub, lo, hi) == data.find(sub, lo, hi), (sub, lo, hi)
    (tmp_path / "img").write_bytes(data)
    with open(tmp_path / "img", "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for sub in needles:
            assert find(m, sub, 0, len(m)) == data.find(sub) and find(m, sub, 17, 3000) == data.find(sub, 17, 3000)
    with pytest.raises(ValueError):
        find(data, b"x", -1, 10)
    with native.switched(False):
        assert native.byte_find() is native._py_find
