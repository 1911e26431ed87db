"""The crafted inputs of issue #16 as regression inputs (hand-built bytes, from the issue's descriptions).

Items 4 and 6 (shrinking files, split sizes) are tested in tests/test_common_shrink.py and tests/test_common_split_identity.py.
The Kafka cases of items 5 and 8 each fail on the code before their fix.
"""
from __future__ import annotations

import struct
from pathlib import Path


from builders import kafka_batch as _batch, kafka_builder

from formats import kafka as K


B = kafka_builder()


def _run(*args):
    from click.testing import CliRunner

    from mqtool.cli import cli

    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=True)
    exc = r.exception if r.exception is not None and not isinstance(r.exception, SystemExit) else None
    return r.exit_code, r.stdout, r.stderr, exc


def _partition(tmp_path: Path, log: bytes, index: bytes | None = None) -> Path:
    part = tmp_path / "logs" / "t-0"
    part.mkdir(parents=True)
    (part / "00000000000000000000.log").write_bytes(log)
    if index is not None:
        (part / "00000000000000000000.index").write_bytes(index)
    return part


def _clean(code, err, exc):
    assert exc is None, f"uncaught {type(exc).__name__}: {exc}"
    assert code in (0, 1, 2), code
    assert "Traceback" not in err


def test_rebuild_index_of_a_batch_at_base_offset_2_pow_32(tmp_path):
    # more than index.interval.bytes (4096) before it: the rebuilt .index gets an entry for it
    part = _partition(tmp_path, _batch(0, pad=5000) + _batch(1 << 32, pad=5000) + _batch((1 << 32) + 1))
    code, out, err, exc = _run("rebuild-index", part, "--out", tmp_path / "out", "--json")
    _clean(code, err, exc)


def test_query_a_batch_whose_count_says_2_but_holds_1(tmp_path):
    raw = bytearray(_batch(0, 1))
    struct.pack_into(">i", raw, K.V2_RECORDS_COUNT_OFFSET, 2)
    part = _partition(tmp_path, B.restamp_crc(raw))
    code, out, err, exc = _run("query", part, "--offset", "0", "--json")
    _clean(code, err, exc)


def test_query_through_an_index_entry_at_a_negative_position(tmp_path):
    log = b"".join(_batch(i * 3, 3) for i in range(4))
    part = _partition(tmp_path, log, struct.pack(">ii", -933165402, -2064730467))     # (relative offset, position)
    code, out, err, exc = _run("query", part, "--offset", "5", "--json")
    _clean(code, err, exc)


def test_only_batch_claiming_2_pow_31_minus_1_bytes_is_not_sound(tmp_path):
    raw = bytearray(_batch(0, 2))
    struct.pack_into(">i", raw, K.LOG_OVERHEAD - 4, 0x7FFFFFFF)      # batchLength (after the baseOffset)
    part = _partition(tmp_path, bytes(raw))
    code, out, err, exc = _run("verify", "store", part.parent, "--json")
    _clean(code, err, exc)
    assert code == 1, (code, out[-500:])
