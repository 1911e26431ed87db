"""The column lanes of the Kafka and LiteMQ range readers (``iter_range_columns``: what the Spark data source and
``export`` read; no dict per row) give exactly the rows of the row lane (``iter_range_rows``, the rows of
``dump``), value by value, column by column, with the damage notes in the same order: on every real store, cut
into small ranges, and on damaged copies (a batch whose CRC fails, a truncated segment, a LiteMQ chain that ends
in damage). No Spark needed."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import realdata_root, require_realdata
from mqtool.kafka import ranges as KR
from mqtool.litemq import ranges as LR
from mqtool.options import DumpOptions


def _kafka_stores() -> list[Path]:
    root = require_realdata("kafka")
    return sorted(p for p in root.iterdir() if p.is_dir())


def _lite_stores() -> list[Path]:
    return [require_realdata("litemq", n, "data", "broker") for n in ("clean", "crash")]


def _both(mod, path, opts, split) -> int:
    """Compares the lanes range by range; returns how many damage notes the ranges gave."""
    names = [n for n, _ in mod.ROW_FIELDS if n != "store"]
    ranges = mod.plan(str(path), split)
    assert ranges
    noted = 0
    for rng in ranges:
        notes_rows: list = []
        want = list(mod.iter_range_rows(rng, opts, on_damage=notes_rows.append))
        notes_cols: list = []
        got: list[dict] = []
        chunks = mod.iter_range_columns(rng, opts, names, on_damage=notes_cols.append)
        assert chunks is not None
        for by_topic in chunks:
            for topic, (cols, n) in by_topic.items():
                assert set(cols) <= set(names)
                for i in range(n):
                    row = {k: cols[k][i] for k in names if k in cols}
                    assert row.get("topic") == topic
                    got.append(row)
        got.sort(key=lambda r: r["position"])       # chunks are grouped by topic (LiteMQ): back in file order
        assert len(got) == len(want), rng
        for g, w in zip(got, want):
            w = {k: v for k, v in w.items() if k in names}      # `*_encoding` markers are no columns
            assert {k: g.get(k) for k in w} == w, rng
            assert all(v is None for k, v in g.items() if k not in w), (rng, {k: v for k, v in g.items() if k not in w})
        assert notes_cols == notes_rows, rng
        noted += len(notes_rows)
    return noted


@pytest.mark.parametrize("split", [None, 1024])
def test_kafka_columns_equal_rows_on_real_stores(split):
    for p in _kafka_stores():
        _both(KR, p, DumpOptions(), split)


def test_kafka_columns_on_damaged_copies(tmp_path):
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT")
    store = tmp_path / "k"
    shutil.copytree(src, store, symlinks=True)
    logs = sorted(f for f in store.rglob("*.log") if f.stat().st_size > 300)
    assert len(logs) >= 2
    for f in [store, *store.rglob("*")]:
        if not f.is_symlink():
            f.chmod(0o755 if f.is_dir() else 0o644)
    b = bytearray(logs[0].read_bytes())
    b[100] ^= 0xFF                       # inside the first batch: its CRC fails
    logs[0].write_bytes(bytes(b))
    b = logs[1].read_bytes()
    logs[1].write_bytes(b[:len(b) - 7])     # a partial tail
    for split in (None, 200):
        assert _both(KR, store, DumpOptions(), split) >= 2


def test_kafka_columns_leave_record_rows_to_the_rows():
    rng = KR.plan(str(_kafka_stores()[0]))[0]
    assert KR.iter_range_columns(rng, DumpOptions(deep=True), ["kind"]) is None
    assert KR.iter_range_columns(rng, DumpOptions(from_offset=3), ["kind"]) is None


@pytest.mark.parametrize("body,split", [("none", None), ("base64", 3000), ("text", 1024), ("hex", None)])
def test_litemq_columns_equal_rows_on_real_stores(body, split):
    for p in _lite_stores():
        _both(LR, p, DumpOptions(body=body), split)


def test_litemq_columns_with_filters():
    for p in _lite_stores():
        _both(LR, p, DumpOptions(tag="TagA"), 4096)
        _both(LR, p, DumpOptions(topic="no-such-topic"), None)


def test_litemq_columns_where_the_chain_ends_in_damage(tmp_path):
    src = require_realdata("litemq", "clean", "data", "broker")
    store = tmp_path / "broker"
    shutil.copytree(src, store, symlinks=True)
    for f in [store, *store.rglob("*")]:
        if not f.is_symlink():
            f.chmod(0o755 if f.is_dir() else 0o644)
    seg = sorted((store / "commitlog").iterdir())[0] if (store / "commitlog").is_dir() else None
    assert seg is not None, list(store.iterdir())
    b = bytearray(seg.read_bytes())
    length = int.from_bytes(b[0:4], "big")
    at = 4 + length                      # the second record: its magic broken
    b[at + 4] ^= 0xFF
    seg.write_bytes(bytes(b))
    for split in (None, 512):
        assert _both(LR, store, DumpOptions(), split) == 1
    assert realdata_root().exists()
