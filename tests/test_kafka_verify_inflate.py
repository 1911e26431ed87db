"""verify's inflate check (``payload-inflate-failed`` without ``--deep``) through the compiled decoders of
``kafka.c`` (``inflate``: snappy, lz4, zstd without the GIL) gives the findings of the Python codecs.

The decoders decline what they do not inflate whole (a damaged stream, one that states more than 16 MiB, a
framing they do not know), and the Python codecs then read the payload and say what is wrong; where they inflate a
payload, the Python codecs inflate it to the same bytes (``tests/test_kafka_native_codecs.py``). Here: logs of
compressed batches, some with payloads damaged under a valid CRC (a byte flipped, the stream cut, replaced by
garbage, bytes after it) are verified with the helpers on and off (``MQTOOL_NATIVE=0``); the findings
and exit codes are equal, and every damaged payload is found (counted from what was damaged, not from a run).
"""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import kafka_builder, kafka_codec_batch
from formats import kafka as K
from mqtool.kafka.verify import log as VL

BK = kafka_builder()
CODECS = [K.CODEC_GZIP, K.CODEC_SNAPPY, K.CODEC_LZ4, K.CODEC_ZSTD]
KINDS, INFLATE = VL._native_inflate()
needs_native = pytest.mark.skipif(INFLATE is None, reason="compiled kafka helper not built, or MQTOOL_NATIVE=0")


def _batch(base: int, codec: int, salt: int) -> bytes:
    recs = [BK.record(i, i, b"k%d" % i, b'{"n":%d,"pad":"%s"}' % (i, b"x" * (salt % 50))) for i in range(4)]
    return kafka_codec_batch(base, recs, codec, base_ts=BK.T0, max_ts=BK.T0 + 4)


def _damaged(raw: bytes, how: str, at: int) -> bytes:
    """``raw`` with its payload damaged by ``how`` and its CRC made valid again (the CRC covers the damage)."""
    head, payload = bytearray(raw[:K.V2_HEADER_SIZE]), bytearray(raw[K.V2_HEADER_SIZE:])
    i = at % len(payload)
    if how == "flip":
        payload[i] ^= 0x5A
    elif how == "cut":
        del payload[max(1, i):]
    elif how == "garbage":
        payload[:] = bytes([0xA5]) * len(payload)
    elif how == "tail":
        payload += b"\x01\x02\x03"
    out = head + payload
    out[8:12] = (len(out) - 12).to_bytes(4, "big", signed=True)
    return BK.restamp_crc(out)


@st.composite
def logs(draw):
    parts, damaged, base = [], 0, 0
    for k in range(draw(st.integers(1, 10))):
        raw = _batch(base, draw(st.sampled_from(CODECS)), k)
        how = draw(st.sampled_from([None, None, "flip", "cut", "garbage", "tail"]))
        if how is not None:
            raw = _damaged(raw, how, draw(st.integers(0, 1 << 16)))
        parts.append(raw)
        base += 4
    return b"".join(parts)


def _findings(run_cli, d):
    code, out, _err = run_cli("verify", "commitlog", d, "--json")
    return code, [json.loads(line) for line in out.splitlines() if line.strip()]


@needs_native
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=logs())
def test_findings_are_the_same_with_the_compiled_decoders(tmp_path_factory, monkeypatch, run_cli, data):
    d = tmp_path_factory.mktemp("inflate") / "t-0"
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(data)
    on = _findings(run_cli, d)
    with monkeypatch.context() as m:
        m.setenv("MQTOOL_NATIVE", "0")
        off = _findings(run_cli, d)
    assert on == off


@needs_native
def test_each_damaged_payload_is_found_and_the_clean_ones_by_the_helper(tmp_path, monkeypatch, run_cli):
    d = tmp_path / "t-0"
    d.mkdir()
    parts, bad = [], []
    pos = 0
    for k, codec in enumerate(CODECS * 3):
        raw = _batch(4 * k, codec, k)
        if k % 3 == 1:
            raw = _damaged(raw, "garbage", 0)
            bad.append(pos)
        parts.append(raw)
        pos += len(raw)
    (d / "00000000000000000000.log").write_bytes(b"".join(parts))
    calls = []
    real = VL._native_inflate

    def spy():
        kinds, fn = real()
        return kinds, (lambda *a: calls.append(a[0]) or fn(*a))

    monkeypatch.setattr(VL, "_native_inflate", spy)
    code, rows = _findings(run_cli, d)
    found = sorted(r["position"] for r in rows if r.get("code") == "kafka.payload-inflate-failed")
    assert found == bad and code == 1
    assert len(calls) == sum(1 for k, codec in enumerate(CODECS * 3) if codec in KINDS)    # gzip: Python's
