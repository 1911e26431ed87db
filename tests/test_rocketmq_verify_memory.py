"""verify store's memory bound: the commitlog pass's cross-reference table (rmqverify.Xref) moves to a temp file
past a budget (``MQTOOL_XREF_BUDGET_MB`` / ``rmqverify.xref_spill``), and the index checks unmap the index file's
pages behind them. Neither may change a finding: with every array of every table spilled (budget 0), the NDJSON
of ``verify store --json`` equals the in-memory table's and the Python path's (no table at all), byte for byte,
on every real RocketMQ store, the bundled fixture and damaged copies, in one process and over ranges (range
tables merged). The table's memory stays within the budget whatever the message count (its own report, checked
against N and 4N messages), and a spilled table holds what the in-memory one does (its export is the same bytes).
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from mqtool import native
from mqtool.rocketmq import dispatch, indexfiles
from mqtool.rocketmq.layout import FIXED_SIZE
from mqtool.rocketmq.verify import consumequeue as VCQ, index as VIDX, native_lane
from tests.conftest import require_realdata, writable_copy

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(native_lane.new_xref() is None,
                                reason="compiled helper rmqverify not built (tests/test_common_native.py fails "
                                       "under CI when it is missing)")
JOBS = ([], ["--jobs", "2", "--split-size", "16K"])
CQ, ENTRY = indexfiles.CQ_STRUCT, indexfiles.IDX_ENTRY


@pytest.fixture(autouse=True)
def nogil_everywhere(monkeypatch):
    """Every span the compiled lane walks here runs without the GIL (range tables fill, and spill, on two threads
    at once) and verify store checks the index files on a thread ahead (the real stores are far below the
    defaults for both)."""
    monkeypatch.setattr(VIDX, "AHEAD_MIN_BYTES", 0)
    v = native.load("rmqverify")
    old = v.nogil_min(0)
    yield
    v.nogil_min(old)


class _Tables(list):
    """Every table ``new_xref`` makes, and which files the tables proved clean (the rest took the Python loops)."""

    def __init__(self, monkeypatch):
        super().__init__()
        self.proven: list = []
        new, proven, entries = native_lane.new_xref, VCQ._proven_clean, VIDX._check_entries

        def recorded(*a, **k):
            x = new(*a, **k)
            self.append(x)
            return x

        def counted_proven(ctx, qf):
            r = proven(ctx, qf)
            self.proven.append((qf.files[0].path, r))
            return r

        def counted_entries(ctx, path, *a):
            self.proven.append((path, None))
            return (yield from entries(ctx, path, *a))

        monkeypatch.setattr(native_lane, "new_xref", recorded)
        monkeypatch.setattr(VCQ, "_proven_clean", counted_proven)
        monkeypatch.setattr(VIDX, "_check_entries", counted_entries)

    def clear(self):
        super().clear()
        self.proven = []


@pytest.fixture()
def tables(monkeypatch):
    return _Tables(monkeypatch)


def _three_ways(run_cli, monkeypatch, tables, store, extra=()) -> tuple[str, int, int]:
    """verify store --json with the table spilled whole (budget 0), in memory (no limit) and with no table
    (the Python path): the same exit code and bytes, and the same files proven clean by the table. Returns the
    output, the bytes the spilled run's tables had in the spill file (every table that noted something had its
    arrays there) and how many files they proved clean. The spilled run maps every
    input, however small (so the index checks unmap the index files' pages behind them)."""
    from mqtool import io

    monkeypatch.setenv("MQTOOL_XREF_BUDGET_MB", "0")
    tables.clear()
    with monkeypatch.context() as m:
        m.setattr(io, "READ_WHOLE_LIMIT", 0)
        spilled = run_cli("verify", "store", store, "--json", *extra)
    stats = [x.stats() for x in tables if x is not None]
    assert all(s["spilled"] for s in stats if s["queues"] or s["messages_with_keys"]), store
    proven = sorted(tables.proven, key=repr)
    monkeypatch.setenv("MQTOOL_XREF_BUDGET_MB", str(1 << 20))
    tables.clear()
    kept = run_cli("verify", "store", store, "--json", *extra)
    assert all(x is None or not x.stats()["spilled"] for x in tables)
    assert proven == sorted(tables.proven, key=repr), store     # the same files proven clean, the same way
    monkeypatch.delenv("MQTOOL_XREF_BUDGET_MB")
    with native.switched(False):
        python = run_cli("verify", "store", store, "--json", *extra)
    assert spilled[:2] == kept[:2] == python[:2], store
    return spilled[1], sum(s["spilled"] for s in stats), sum(1 for _, r in proven if r is not None)


def _real_stores() -> list[Path]:
    root = require_realdata("rocketmq")
    return sorted(p for p in root.glob("*/store") if p.is_dir())


def test_spilled_table_gives_the_same_findings_on_real_stores(run_cli, monkeypatch, tables):
    stores = _real_stores() + [REPO / "fixtures" / "rocketmq" / "store"]
    assert len(stores) >= 10
    spilled = proven = 0
    for store in stores:
        for extra in JOBS:
            _, b, n = _three_ways(run_cli, monkeypatch, tables, store, extra)
            spilled, proven = spilled + b, proven + n
    assert spilled > 1 << 20 and proven > 50      # the spilled tables proved files clean (not a vacuous pass)


@pytest.fixture()
def store(tmp_path):
    return writable_copy(require_realdata("rocketmq", "gen-4.9.7-clean", "store"), tmp_path / "store")


def _patch(path: Path, at: int, st: struct.Struct, change) -> None:
    data = bytearray(path.read_bytes())
    st.pack_into(data, at, *change(st.unpack_from(data, at)))
    path.write_bytes(bytes(data))


def test_spilled_table_gives_the_same_findings_on_damaged_stores(run_cli, monkeypatch, tables, store):
    """A consumequeue unit pointing elsewhere, an index entry with another key hash, a body byte flipped in the
    commitlog: each shows (its finding is in the output) and the three runs agree."""
    cq = sorted((store / "consumequeue" / "TopicA" / "0").iterdir())[0]
    _patch(cq, 1 * CQ.size, CQ, lambda u: (u[0] + 8, u[1], u[2]))
    idx = sorted((store / "index").iterdir())[0]
    view = indexfiles.read_index_file(str(idx))
    _patch(idx, view.entry_position(2), ENTRY, lambda e: (e[0] + 1, *e[1:]))
    del view
    seg = sorted((store / "commitlog").iterdir())[0]
    data = bytearray(seg.read_bytes())
    data[FIXED_SIZE] ^= 0xFF                          # the first message's first body byte
    seg.write_bytes(bytes(data))
    for extra in JOBS:
        out, spilled, proven = _three_ways(run_cli, monkeypatch, tables, store, extra)
        assert spilled and proven
        for code in ("cq-not-message-start", "index-hash-mismatch", "crc-mismatch"):
            assert f'"code":"{code}"' in out, (code, extra)


# ---- the table itself: bounded memory, the same contents --------------------------------------------------

def _props(i: int) -> bytes:
    return f"TAGS\x01t{i % 5}\x02KEYS\x01k{i} common\x02UNIQ_KEY\x01U{i:08d}".encode()


def _new():
    """An empty table as it is (``new_xref`` would set the budget from the environment again)."""
    return native.load("rmqverify").Xref()


def _fill(x, n: int):
    """Message i at offset 250 i in queue Topic{i % 4}/{i % 3}, queue offset i // 12 (consecutive per queue)."""
    for i in range(n):
        x.add(i * 250, 250, b"Topic%d" % (i % 4), i % 3, i // 12, 1_700_000_000_000 + i, _props(i))
    return x


@pytest.fixture()
def budget(tmp_path):
    """Set the process's table budget (bytes) with a spill directory in tmp_path; restored after."""
    v = native.load("rmqverify")
    native_lane.new_xref()                           # configured
    old = [None]

    def setb(n):
        prev = v.xref_spill(n, os.fsencode(tmp_path))
        if old[0] is None:
            old[0] = prev
        return tmp_path

    yield setb
    if old[0] is not None:
        v.xref_spill(old[0])


def test_table_memory_does_not_grow_with_the_message_count(budget):
    """Under a 256 KiB budget the table's memory stays under it for N and for 4N messages (what is past it is
    in the spill file), while in memory without a budget it grows about fourfold."""
    n, b = 20_000, 256 << 10
    budget(-1)
    free_n, free_4n = _fill(_new(), n).stats(), _fill(_new(), 4 * n).stats()
    assert free_4n["bytes"] > 3 * free_n["bytes"] > 3 * b and free_4n["spilled"] == 0
    budget(b)
    small, big = _fill(_new(), n).stats(), _fill(_new(), 4 * n).stats()
    assert small["bytes"] <= b + (16 << 10) and big["bytes"] <= b + (16 << 10)   # (+ the queue list)
    assert big["spilled"] > 3 * b and big["spilled"] > small["spilled"]
    assert (small["messages_with_keys"], big["messages_with_keys"]) == (n, 4 * n)


def test_spilled_table_holds_what_the_kept_one_does(budget):
    """Export (every array, byte for byte), the consumequeue check and merging (by table and by export, the
    range tasks' two ways) are the same with the arrays spilled as in memory; the spill file is emptied when
    the tables are gone."""
    budget(-1)
    kept = _fill(_new(), 30_000)
    parts_kept = [_fill(_new(), 3000) for _ in range(2)]
    d = budget(0)
    spilled = _fill(_new(), 30_000)
    assert spilled.stats()["spilled"] and spilled.stats()["bytes"] < kept.stats()["bytes"] // 10
    assert spilled.export() == kept.export()
    # queue Topic0/0 holds messages 0, 12, 24, ... (queue offsets 0, 1, 2, ...): its units by the dispatch rule
    units = b"".join(CQ.pack(i * 250, 250, dispatch.tags_code(f"t{i % 5}")) for i in range(0, 30_000, 12))
    n = len(units) // CQ.size
    for x in (kept, spilled):
        assert x.cq_check(units, n, 0, False, b"Topic0", 0, None) == (True, n - 1)
        assert x.cq_check(units, n, 1, False, b"Topic0", 0, None) is None          # shifted: no claim
        assert x.cq_check(units[:-4] + b"\0\0\0\1", n, 0, False, b"Topic0", 0, None) is None   # a tagsCode
    by_table, by_blob = _new(), _new()
    for p in parts_kept:
        by_blob.merge(p.export())
    for _ in range(2):
        by_table.merge(_fill(_new(), 3000))
    assert by_table.stats()["spilled"] and by_blob.stats()["spilled"]
    assert by_table.export() == by_blob.export()
    del spilled, by_table, by_blob
    assert not [p for p in d.iterdir()]              # unlinked at once: nothing is left under its directory


def test_index_pages_are_dropped_only_from_maps(monkeypatch):
    """The index checks unmap pages behind them (drop) only where that loses nothing: a map of the file, never a
    bytes object (verify/index._drops); on the map the answers are those without dropping, and the map reads the
    file's bytes after."""
    from mqtool import io

    src = require_realdata("rocketmq", "gen-4.9.7-clean", "store")
    path = sorted((src / "index").iterdir())[0]
    whole = indexfiles.read_index_file(str(path))
    assert isinstance(whole.data, bytes) and not VIDX._drops(whole)      # a small file is read whole
    monkeypatch.setattr(io, "READ_WHOLE_LIMIT", 0)
    view = indexfiles.read_index_file(str(path))
    assert VIDX._drops(view)
    v = native.load("rmqverify")
    n, slots = view.entry_count, view.slot_num
    assert v.index_chains(view.data, slots, n, True) == v.index_chains(whole.data, slots, n) not in (None, False)
    assert bytes(view.data) == whole.data == path.read_bytes()          # dropped pages read back from the file
