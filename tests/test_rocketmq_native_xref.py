"""verify store with the commitlog pass's cross-reference table (rmqverify.Xref, verify/native_lane.new_xref) ==
without it.

The consumequeue and index checks prove a whole file clean from the table the commitlog pass fills and run
their Python loops on any file it cannot prove clean; the findings must be the Python path's, byte for byte.
Every comparison runs the same ``verify store --json`` with the compiled helpers on and off
(``native.switched``, the Python path is the reference) on: every real RocketMQ store, the bundled fixture,
and copies of a real store with damage in consumequeue files, index files and the commitlog -- one process
and over ranges (--jobs 2, small splits: the tables of the range tasks merged). Each damage test also checks
the damage shows (its finding is there) and that the file it hit took the Python loop, and the clean stores
check the table really proved files clean (a test the fast path never took would pass vacuously).
"""
from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from formats import rocketmq as F
from mqtool import native
from mqtool.rocketmq import indexfiles
from mqtool.rocketmq.layout import FIXED_SIZE
from mqtool.rocketmq.verify import consumequeue as VCQ, index as VIDX, native_lane
from tests.conftest import require_realdata, writable_copy

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(native_lane.new_xref() is None,
                                reason="compiled helper rmqverify not built (tests/test_common_native.py fails "
                                       "under CI when it is missing)")
JOBS = ([], ["--jobs", "1"], ["--jobs", "2", "--split-size", "16K"])
CQ, ENTRY = indexfiles.CQ_STRUCT, indexfiles.IDX_ENTRY


class _Tally:
    """How often the table proved a queue / an index file clean, and how often the Python loops ran."""

    def __init__(self, monkeypatch):
        self.cq_fast, self.cq_slow, self.idx_files, self.idx_slow, self.slow_paths = 0, 0, 0, 0, []
        proven, entries, one_file = VCQ._proven_clean, VIDX._check_entries, VIDX._verify_index_file

        def counted_proven(ctx, qf):
            r = proven(ctx, qf)
            if r is None:
                self.cq_slow += 1
                self.slow_paths += [s.path for s in qf.files]
            else:
                self.cq_fast += 1
            return r

        def counted_entries(ctx, path, *a):
            self.idx_slow += 1
            self.slow_paths.append(path)
            return (yield from entries(ctx, path, *a))

        def counted_file(*a):
            self.idx_files += 1
            return (yield from one_file(*a))

        monkeypatch.setattr(VIDX, "_verify_index_file", counted_file)
        monkeypatch.setattr(VCQ, "_proven_clean", counted_proven)
        monkeypatch.setattr(VIDX, "_check_entries", counted_entries)


def _both(run_cli, store, extra=(), part="store") -> str:
    """The NDJSON of verify PART with the helpers on; asserts the Python path gives the same bytes."""
    code, out, _ = run_cli("verify", part, store, "--json", *extra)
    with native.switched(False):
        code_py, out_py, _ = run_cli("verify", part, store, "--json", *extra)
    assert (code, out) == (code_py, out_py)
    return out


def _real_stores() -> list[Path]:
    root = require_realdata("rocketmq")
    return sorted(p for p in root.glob("*/store") if p.is_dir())


def test_real_stores_and_fixture_equal_python(run_cli, monkeypatch):
    tally = _Tally(monkeypatch)
    stores = _real_stores() + [REPO / "fixtures" / "rocketmq" / "store"]
    assert len(stores) >= 10
    for store in stores:
        for extra in JOBS:
            _both(run_cli, store, extra)
    assert tally.cq_fast > 50          # the table proved queues clean (the rest: LMQ, schedule topic, damage)
    assert tally.idx_files - tally.idx_slow > 10   # ... and index files (the loops ran only on the others)


@pytest.fixture(autouse=True)
def nogil_everywhere(monkeypatch):
    """Every span the compiled lane walks in this module runs without the GIL, and verify store checks the index
    files on a thread ahead (the stores are far below the 1 MiB a span and the 256 MiB a commitlog needs for that
    by default; the other verify tests keep the defaults, so both ways are compared)."""
    from mqtool.rocketmq.verify import index as VI

    monkeypatch.setattr(VI, "AHEAD_MIN_BYTES", 0)
    v = native.load("rmqverify")
    old = v.nogil_min(0)
    try:
        yield v
    finally:
        v.nogil_min(old)


def test_threads_without_gil_equal_the_pool_and_one_process(run_cli, monkeypatch, nogil_everywhere):
    """``--jobs 2`` walks the ranges on two threads, the compiled lane without the GIL: the NDJSON equals the
    process pool's, ``--jobs 1``'s and the Python path's on every real store and the fixture, for range splits
    of every size (many ranges per segment, ranges that cut units, one range per segment)."""
    from mqtool.rocketmq.verify import ranges as VR

    assert nogil_everywhere.walks_without_gil()
    used = []
    real = VR.ThreadRunner.imap
    monkeypatch.setattr(VR.ThreadRunner, "imap", lambda self, fn, items: used.append(self.jobs) or real(self, fn, items))
    for store in _real_stores() + [REPO / "fixtures" / "rocketmq" / "store"]:
        one = _both(run_cli, store, ["--jobs", "1"])
        for split in ("4K", "16K", "1M"):
            threads = run_cli("verify", "store", store, "--json", "--jobs", "2", "--split-size", split)
            monkeypatch.setattr(VR, "THREADS", False)
            pool = run_cli("verify", "store", store, "--json", "--jobs", "2", "--split-size", split)
            monkeypatch.setattr(VR, "THREADS", True)
            assert threads == pool and threads[1] == one, (store, split)
    # no --split-size: threads take guided ranges (GUIDED_MIN made tiny here: several per store)
    from mqtool.rocketmq.store import open_store

    plans, checked = [], 0
    real_guided = VR.guided_ranges
    monkeypatch.setattr(VR, "guided_ranges", lambda *a: plans.append(real_guided(*a)) or plans[-1])
    monkeypatch.setattr(VR, "GUIDED_MIN", 4096)
    monkeypatch.setattr(VR, "NATIVE_VERIFY_PARALLEL_MIN_BYTES", 0)
    for store in _real_stores():
        plans.clear()
        assert run_cli("verify", "store", store, "--json", "--jobs", "2")[1] == \
            run_cli("verify", "store", store, "--json", "--jobs", "1")[1], store
        segs = open_store(store).segments
        if sum(s.size for s in segs) < 2 * 4096 or len(plans) == 0:
            continue
        (plan,) = plans
        for si, seg in enumerate(segs):           # each segment covered exactly, in order
            mine = [(r.start, r.stop) for r in plan if r.seg_index == si]
            assert mine[0][0] == 0 and mine[-1][1] == seg.size
            assert all(a[1] == b[0] for a, b in zip(mine, mine[1:]))
        sizes = [r.length for r in plan]
        assert len(plan) > 1 and sizes[0] >= sizes[-1]
        checked += 1
    assert checked >= 3
    assert used and set(used) == {2}


def test_thread_runner_keeps_order_window_and_errors():
    """ThreadRunner: results in submission order whatever order tasks finish in, at most ``window`` tasks
    started and not handed on, a task's exception raised in the caller, and closing early stops the rest."""
    import threading
    import time

    from mqtool.rocketmq.verify.ranges import ThreadRunner

    lock, live, peak, ran = threading.Lock(), [0], [0], []

    def task(i):
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
            ran.append(i)
        time.sleep(0.002 * ((7 * i) % 5))
        if i == 13:
            raise KeyError(i)
        return i * i

    def handed(it):
        for r in it:
            with lock:
                live[0] -= 1
            yield r

    assert list(handed(ThreadRunner(3, window=4).imap(task, range(12)))) == [i * i for i in range(12)]
    assert peak[0] <= 4
    with pytest.raises(KeyError):
        list(ThreadRunner(2).imap(task, range(20)))
    ran.clear()
    it = ThreadRunner(2, window=2).imap(task, range(100))
    assert next(it) == 0
    it.close()                                   # the threads are joined: nothing more starts
    n = len(ran)
    time.sleep(0.05)
    assert len(ran) == n <= 4


def test_consumequeue_and_index_parts_equal_python(run_cli, monkeypatch):
    """verify consumequeue / verify index: the light dispatch pass fills the table too."""
    tally = _Tally(monkeypatch)
    for store in _real_stores() + [REPO / "fixtures" / "rocketmq" / "store"]:
        for part in ("consumequeue", "index"):
            _both(run_cli, store, (), part)
    assert tally.cq_fast > 20 and tally.idx_files - tally.idx_slow > 5


@pytest.fixture()
def store(tmp_path):
    return writable_copy(require_realdata("rocketmq", "gen-4.9.7-clean", "store"), tmp_path / "store")


def _cq_file(store, topic="TopicA", qid=0, i=0) -> Path:
    return sorted((store / "consumequeue" / topic / str(qid)).iterdir())[i]


def _patch_unit(path: Path, k: int, **change) -> tuple:
    data = bytearray(path.read_bytes())
    off, size, tags = CQ.unpack_from(data, k * CQ.size)
    vals = dict(offset=off, size=size, tags=tags)
    vals.update({n: f(vals[n]) if callable(f) else f for n, f in change.items()})
    CQ.pack_into(data, k * CQ.size, vals["offset"], vals["size"], vals["tags"])
    path.write_bytes(bytes(data))
    return off, size, tags


def _damaged(run_cli, monkeypatch, store, code: str, hit: Path | None) -> None:
    tally = _Tally(monkeypatch)
    for extra in JOBS:
        out = _both(run_cli, store, extra)
        assert f'"code":"{code}"' in out
    if hit is not None and not code.startswith(("crc", "index")):
        assert f'"code":"{code}"' in _both(run_cli, store, (), "consumequeue")
    if hit is not None and code.startswith("index"):
        assert f'"code":"{code}"' in _both(run_cli, store, (), "index")
    if hit is not None:
        assert str(hit) in tally.slow_paths        # the file the damage is in took the Python loop
    assert tally.cq_fast > 0                       # ... and undamaged queues were proven clean


@pytest.mark.parametrize("what,code", [
    ("size", "cq-size-mismatch"), ("tags", "cq-tags-code-mismatch"), ("hole", "cq-hole"),
    ("dangling", "cq-dangling"), ("mid-message", "cq-not-message-start"), ("other-queue", "cq-wrong-message"),
    ("blank-after-real", "cq-blank-fill-misplaced"), ("bad-unit", "cq-bad-unit")])
def test_damaged_consumequeue_equals_python(run_cli, monkeypatch, store, what, code):
    path = _cq_file(store)
    if what == "size":
        _patch_unit(path, 1, size=lambda v: v + 1)
    elif what == "tags":
        _patch_unit(path, 2, tags=lambda v: v ^ 1)
    elif what == "hole":
        _patch_unit(path, 1, offset=0, size=0, tags=0)
    elif what == "dangling":
        _patch_unit(path, 2, offset=lambda v: v + (1 << 30))
    elif what == "mid-message":
        _patch_unit(path, 1, offset=lambda v: v + 8)
    elif what == "other-queue":
        other = CQ.unpack_from(_cq_file(store, "TopicB").read_bytes(), 0)
        _patch_unit(path, 1, offset=other[0], size=other[1], tags=other[2])
    elif what == "blank-after-real":
        _patch_unit(path, 2, offset=0, size=F.CQ_BLANK_SIZE, tags=0)
    elif what == "bad-unit":
        _patch_unit(path, 1, size=-5)
    _damaged(run_cli, monkeypatch, store, code, path)


def test_renamed_consumequeue_file_equals_python(run_cli, monkeypatch, store):
    """A wrong file name: every unit of the file claims other queue offsets (and the name breaks the sequence)."""
    path = _cq_file(store, i=1)
    moved = path.with_name(f"{int(path.name) + 3 * CQ.size:020d}")
    path.rename(moved)
    _damaged(run_cli, monkeypatch, store, "cq-queue-offset-mismatch", moved)


def test_tags_code_out_of_int_range_is_accepted_like_python(run_cli, monkeypatch, store):
    """A tagsCode below Integer.MIN_VALUE (the broker's extended form) is no finding, in both paths."""
    path = _cq_file(store)
    _patch_unit(path, 1, tags=-(1 << 40))
    out = _both(run_cli, store)
    assert "cq-tags-code-mismatch" not in out


def _index(store) -> tuple[Path, indexfiles.IndexFileView]:
    path = sorted((store / "index").iterdir())[0]
    return path, indexfiles.read_index_file(str(path))


def _patch_entry(path: Path, view, k: int, **change) -> tuple:
    data = bytearray(path.read_bytes())
    pos = view.entry_position(k)
    vals = dict(zip(("hash", "off", "td", "prev"), ENTRY.unpack_from(data, pos)))
    vals.update({n: f(vals[n]) if callable(f) else f for n, f in change.items()})
    ENTRY.pack_into(data, pos, vals["hash"], vals["off"], vals["td"], vals["prev"])
    path.write_bytes(bytes(data))
    return vals


@pytest.mark.parametrize("where", ["clean", "first-half", "second-half", "time-last"])
def test_index_entry_check_in_two_halves_equals_python(run_cli, monkeypatch, store, where):
    """A big index file's entry check runs in two halves on two threads (``index.SPLIT_ENTRIES``; here every
    file): their results combined (slot count, min/max offset, max time for the header checks) give the NDJSON
    of the Python path, clean and with an entry damaged in either half."""
    from mqtool.rocketmq.verify import index as VI

    monkeypatch.setattr(VI, "AHEAD_MIN_BYTES", 0)
    monkeypatch.setattr(VI, "SPLIT_ENTRIES", 2)
    path, view = _index(store)
    n = view.entry_count
    assert n >= 8
    if where == "first-half":
        _patch_entry(path, view, 2, hash=lambda v: v + 1)
    elif where == "second-half":
        _patch_entry(path, view, n - 1, hash=lambda v: v + 1)
    elif where == "time-last":
        _patch_entry(path, view, n, td=lambda v: v + 5)
    parts = []
    real = VI._index_check

    def spy(xref, v, chains, threading):
        got = real(xref, v, chains, threading)
        parts.append((v.path, got))
        return got

    monkeypatch.setattr(VI, "_index_check", spy)
    out = _both(run_cli, store)
    assert any(p == str(path) for p, _ in parts)
    if where == "clean":
        assert all(got is not None for _, got in parts)
        assert "mismatch" not in out and "index-bad" not in out
    else:
        assert [got for p, got in parts if p == str(path)] == [None]        # the Python loops then ran
        assert '"code":"index-hash-mismatch"' in out or '"code":"index-time-mismatch"' in out


@pytest.mark.parametrize("what,code", [
    ("bad-slot", "index-bad-slot"), ("slot-of-other-bucket", "index-bad-slot"),
    ("key-hash", "index-hash-mismatch"), ("shared-tail", "index-chain-cycle"), ("bad-link", "index-bad-link"),
    ("time", "index-time-mismatch"), ("mid-message", "index-not-message-start"),
    ("unreachable", "index-unreachable")])
def test_damaged_index_equals_python(run_cli, monkeypatch, store, what, code):
    path, view = _index(store)
    n = view.entry_count
    assert n >= 4
    used = view.nonzero_slots()
    if what in ("bad-slot", "slot-of-other-bucket", "unreachable"):
        i, val = used[0]
        new = {"bad-slot": n + 7, "slot-of-other-bucket": used[1][1], "unreachable": 0}[what]
        data = bytearray(path.read_bytes())
        struct.pack_into(">i", data, F.INDEX_HEADER_SIZE + 4 * i, new)
        path.write_bytes(bytes(data))
    elif what == "key-hash":
        _patch_entry(path, view, 2, hash=lambda v: v + 1)
    elif what == "shared-tail":
        # the head of one bucket linked to the head of another: the walk reaches that one twice
        a, b = sorted((used[0][1], used[1][1]))
        _patch_entry(path, view, b, prev=a)
    elif what == "bad-link":
        _patch_entry(path, view, 3, prev=3)
    elif what == "time":
        _patch_entry(path, view, 3, td=lambda v: v + 5)
    elif what == "mid-message":
        _patch_entry(path, view, 2, off=lambda v: v + 4)
    _damaged(run_cli, monkeypatch, store, code, path)


def test_index_chains_are_taken_ahead_by_verify_store(run_cli, monkeypatch, store):
    """verify store checks the index files' chains on a thread during the commitlog pass
    (``index.ChainsAhead``), their entries on it during the consumequeue checks, and takes both for each file;
    the NDJSON equals the Python path's, clean and with each chain damage (the chains then say False and the
    Python loops run)."""
    from mqtool.rocketmq.verify import index as VI

    v = native.load("rmqverify")
    monkeypatch.setattr(VI, "AHEAD_MIN_BYTES", 0)                  # (on by default from a 256 MiB commitlog)
    path, view = _index(store)
    taken = []
    real = VI.ChainsAhead.take
    monkeypatch.setattr(VI.ChainsAhead, "take", lambda self, p: taken.append(real(self, p)) or taken[-1])
    _both(run_cli, store)
    assert [t[1] for t in taken if t is not None and t[0].path == str(path)] == \
        [v.index_chains(path.read_bytes(), view.slot_num, view.entry_count)]
    # ... and the entry checks ran ahead too (during the consumequeue checks), proving the clean files clean
    assert all(t[2] is not VI.UNCHECKED and t[2] is not None for t in taken if t is not None)
    used = view.nonzero_slots()
    code = {"unreachable": "index-unreachable", "shared-tail": "index-chain-cycle", "bad-slot": "index-bad-slot"}
    for damage in ("unreachable", "shared-tail", "bad-slot"):
        data = bytearray(path.read_bytes())
        if damage == "unreachable":
            struct.pack_into(">i", data, F.INDEX_HEADER_SIZE + 4 * used[0][0], 0)
            path.write_bytes(bytes(data))
        elif damage == "shared-tail":
            a, b = sorted((used[1][1], used[2][1]))
            _patch_entry(path, view, b, prev=a)
        else:
            struct.pack_into(">i", data, F.INDEX_HEADER_SIZE + 4 * used[3][0], view.entry_count + 9)
            path.write_bytes(bytes(data))
        chains = v.index_chains(path.read_bytes(), view.slot_num, view.entry_count)
        assert (chains is False) == (damage != "unreachable") and chains is not None, damage
        taken.clear()
        assert f'"code":"{code[damage]}"' in _both(run_cli, store)
        assert any(t is not None for t in taken)
    assert v.index_chains(path.read_bytes(), view.slot_num + 1, view.entry_count) is None   # does not fit


def _first_message(store) -> tuple[Path, int, int]:
    seg = sorted((store / "commitlog").iterdir())[0]
    data = seg.read_bytes()
    size = struct.unpack_from(">i", data, 0)[0]
    return seg, 0, size


def test_bad_crc_in_commitlog_equals_python(run_cli, monkeypatch, store):
    """A body byte flipped: the message takes the full path (crc-mismatch), which notes it in the table too."""
    seg, pos, size = _first_message(store)
    data = bytearray(seg.read_bytes())
    data[pos + FIXED_SIZE] ^= 0xFF            # the first body byte (the body follows the fixed part)
    seg.write_bytes(bytes(data))
    _damaged(run_cli, monkeypatch, store, "crc-mismatch", None)


def test_truncated_commitlog_tail_equals_python(run_cli, monkeypatch, store):
    """The last segment with data cut in the middle of a message: units and entries past the end dangle."""
    segs = sorted((store / "commitlog").iterdir())
    last = max((s for s in segs if any(s.read_bytes())), key=lambda s: int(s.name))
    data = last.read_bytes()
    end = len(data.rstrip(b"\x00"))
    last.write_bytes(data[:end - 40])
    tally = _Tally(monkeypatch)
    for extra in JOBS:
        _both(run_cli, store, extra)
    assert tally.cq_fast > 0 and tally.cq_slow > 0


# ---- the core's CRC-32 (mqcore.h mq_crc32: carry-less-multiply folding where the CPU has it) ----------------

def _core_verify():
    from mqtool._native import rmqcore

    return rmqcore.verify


def test_builtin_crc32_equals_zlib_at_every_length_and_alignment():
    """Every length 0..5000 at all 16 alignments, with random start values: the folding CRC (and the table
    alone) equal zlib.crc32; lengths around the 64-byte fold and 16-byte tail boundaries included."""
    import random
    import zlib

    v = _core_verify()
    rnd = random.Random(20)
    data = rnd.randbytes(5100)
    for n in range(5001):
        for al in range(16):
            b = data[al:al + n]
            start = rnd.getrandbits(32)
            want = zlib.crc32(b, start)
            assert v.crc32(b, start) == want, (n, al)
            assert v.crc32_table(b, start) == want, (n, al)
        assert v.crc32(data[:n]) == zlib.crc32(data[:n])


def test_each_crc32_fold_width_equals_zlib_at_every_length_and_alignment():
    """Each folding width alone (128-bit PCLMULQDQ, 512-bit VPCLMULQDQ), whichever mq_crc32 picks on this CPU:
    every length 0..5000 at all 16 alignments with random start values, equal to zlib.crc32 (lengths around
    the 256-byte wide step, the 64-byte fold and the 16-byte tail included). A width this CPU lacks is None."""
    import random
    import zlib

    v = _core_verify()
    rnd = random.Random(21)
    data = rnd.randbytes(5100)
    widths = [w for w in (128, 512) if v.crc32_fold(b"", 0, w) is not None]
    assert (128 in widths) == bool(v.crc32_hardware())
    for n in range(5001):
        for al in range(16):
            b = data[al:al + n]
            start = rnd.getrandbits(32)
            want = zlib.crc32(b, start)
            for w in widths:
                assert v.crc32_fold(b, start, w) == want, (n, al, w)
    with pytest.raises(ValueError):
        v.crc32_fold(b"", 0, 256)


def test_builtin_crc32_equals_zlib_on_real_commitlogs():
    v = _core_verify()
    segs = sorted(require_realdata("rocketmq").glob("*/store/commitlog/*"))
    assert segs
    for seg in segs:
        data = seg.read_bytes()
        assert v.crc32(data) == __import__("zlib").crc32(data), seg
        for cut in (1, 63, 64, 65, 1000):
            assert v.crc32(data[cut:]) == __import__("zlib").crc32(data[cut:]), (seg, cut)


def test_auto_crc_is_the_core_own_when_it_folds(monkeypatch):
    """With carry-less multiplication the core checks bodies itself (no ISA-L call per body); the verify
    NDJSON is the same either way (the equivalence tests above run with the default choice)."""
    from mqtool.rocketmq import layout

    v = _core_verify()
    calls = []
    import mqtool.fastcrc as fastcrc
    monkeypatch.setattr(fastcrc, "crc32", lambda b, s=0: calls.append(1) or __import__("zlib").crc32(b, s))
    monkeypatch.setattr(fastcrc, "IMPLEMENTATION", "isal")
    layout._core.clear()
    try:
        native_lane._native_lane(crc="auto")
        ctx_ok = native_lane._native_lane() is not None
        assert ctx_ok
        from tests.builders import rocketmq_unit
        u = rocketmq_unit()
        from types import SimpleNamespace
        from mqtool.findings import Summary
        ctx = SimpleNamespace(shift=0, last_store_ts=0, summary=Summary(),
                              opts=SimpleNamespace(max_message_size=1 << 22), dispatched_next={})
        lane = native_lane._fast_lane(ctx, {})
        assert lane(u, memoryview(u), 0, len(u), len(u), 0) == (len(u), 1)      # checked and consumed
        assert (calls == []) == bool(v.crc32_hardware())
    finally:
        layout._core.clear()
        native_lane._native_lane(crc="auto")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(data=st.data())
def test_random_damage_equals_python(run_cli, tmp_path_factory, data):
    """Random bytes overwritten in random consumequeue, index and commitlog files of a real store."""
    src = require_realdata("rocketmq", data.draw(st.sampled_from(["gen-4.9.7-kill", "gen-5.1.4-clean"])), "store")
    dst = tmp_path_factory.mktemp("rnd") / "store"
    shutil.copytree(src, dst)
    files = []
    for p in sorted(dst.rglob("*")):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
        if p.is_file() and p.parent.name != "config" and p.stat().st_size and p.name != "lock":
            files.append(p)
    for _ in range(data.draw(st.integers(1, 4))):
        p = data.draw(st.sampled_from(files))
        buf = bytearray(p.read_bytes())
        at = data.draw(st.integers(0, len(buf) - 1))
        chunk = data.draw(st.binary(min_size=1, max_size=8))
        buf[at:at + len(chunk)] = chunk
        p.write_bytes(bytes(buf[:len(p.read_bytes())]))
    _both(run_cli, dst, data.draw(st.sampled_from(JOBS)))


# ---- the table's own answers against hand-built consumequeue / index bytes (expected values from dispatch.py) ----

def _props(**kv) -> bytes:
    return "\x02".join(f"{k}\x01{v}" for k, v in kv.items()).encode()


def _noted(msgs):
    """An Xref noting (offset, size, topic, qid, qoff, ts, props) of each message."""
    x = native_lane.new_xref()
    for off, size, topic, qid, qoff, ts, props in msgs:
        x.add(off, size, topic, qid, qoff, ts, props)
    return x


MSGS = [(i * 300, 300, b"T\xc3\xa9", 1, 10 + i, 1_700_000_000_000 + 1500 * i,
         _props(TAGS=f"tag{i % 3}" if i != 4 else "\u00e9\U0001F600", KEYS=f"k{i} common", UNIQ_KEY=f"U{i:04d}"))
        for i in range(12)]


def test_cq_check_against_units_made_by_the_dispatch_rule():
    from mqtool.rocketmq import dispatch

    x = _noted(MSGS)
    units = bytearray()
    for off, size, topic, qid, qoff, ts, props in MSGS:
        tags = dict(p.split("\x01") for p in props.decode().split("\x02"))["TAGS"]
        units += CQ.pack(off, size, dispatch.tags_code(tags))
    topic = "T\u00e9".encode()
    assert x.cq_check(bytes(units), 12, 10, False, topic, 1, None) == (True, 21)
    assert x.cq_check(bytes(units), 12, 10, False, topic, 1, 12 * 300) == (True, 21)
    assert x.cq_check(bytes(units), 12, 10, False, topic, 1, 12 * 300 - 1) is None     # the last one dangles
    assert x.cq_check(bytes(units), 12, 11, False, topic, 1, None) is None             # queue offsets shifted
    assert x.cq_check(bytes(units), 12, 10, False, topic, 2, None) is None             # another queue
    assert x.cq_check(bytes(units[:40]), 2, 10, True, topic, 1, None) == (True, 11)
    bad = bytearray(units)
    CQ.pack_into(bad, 20 * 5, MSGS[5][0], 300, dispatch.tags_code("other"))
    assert x.cq_check(bytes(bad), 12, 10, False, topic, 1, None) is None
    CQ.pack_into(bad, 20 * 5, MSGS[5][0], 300, -(1 << 35))          # below Integer.MIN_VALUE: accepted
    assert x.cq_check(bytes(bad), 12, 10, False, topic, 1, None) == (True, 21)
    blank = CQ.pack(0, F.CQ_BLANK_SIZE, 0)
    assert x.cq_check(blank + bytes(units), 13, 9, False, topic, 1, None) == (True, 21)
    assert x.cq_check(bytes(units[:20]) + blank, 2, 10, False, topic, 1, None) is None   # blank after real


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.text(st.characters(max_codepoint=127), min_size=1, max_size=20),
                          st.sampled_from(["\u00e9", "\u20ac", "\U0001F600", "\x7f", "\x00"]),
                          st.sampled_from([b"\xc0\x80", b"\xed\xa0\x80", b"\xff", b"\xe2\x82"])), max_size=12))
def test_core_java_hash_over_ascii_runs_and_other_text(pieces):
    """The core's String.hashCode of UTF-8 (``rmq_utf16_hash``: eight ASCII bytes a step, then code points)
    over ASCII runs of every length between other characters and invalid bytes: equal to Java's over the
    decoded text (formats.common.java_string_hash), and it declines what Python's strict decode refuses."""
    from formats.common import java_string_hash

    lib = native.load("rmqrebuild")
    b = b"".join(p if isinstance(p, bytes) else p.encode() for p in pieces)
    try:
        text = b.decode("utf-8")
    except UnicodeDecodeError:
        assert lib.java_hash_utf8(b) is None
        return
    assert lib.java_hash_utf8(b) == java_string_hash(text)


def test_merging_a_table_equals_merging_its_export():
    """Xref.merge(table) (the thread runner hands range tables over as they are) == merge(table.export()) (the
    process pool pickles them): the same table after, for a first table taken over whole and later ones
    appended (queues continued, gaps, a queue going back: dropped; key records in order, then out of order);
    the table handed over is left empty."""
    parts = [MSGS[:5], MSGS[5:9], [(m[0] + 9000, *m[1:4], m[4] + 40, *m[5:]) for m in MSGS[:3]],
             [(m[0] + 20000, *m[1:4], m[4] - 30, *m[5:]) for m in MSGS[9:]], MSGS[:2]]
    by_blob, by_table = native_lane.new_xref(), native_lane.new_xref()
    for msgs in parts:
        by_blob.merge(_noted(msgs).export())
        t = _noted(msgs)
        by_table.merge(t)
        assert t.export() == native_lane.new_xref().export()          # left empty
        assert by_table.export() == by_blob.export()
    with pytest.raises(ValueError):
        by_table.merge(by_table)


def test_queue_offset_gaps_are_bounded():
    """Unknown units filled into a queue's gaps stay within one per noted unit (plus a fixed allowance); a
    queue that jumps further is dropped from the table (its files then take the Python loop)."""
    x = _noted([(i * 100, 100, b"T", 0, i * 1000, 1, b"") for i in range(200)])
    assert x.stats()["bytes"] < 8 << 20
    assert x.cq_check(CQ.pack(0, 100, 0), 1, 0, False, b"T", 0, None) is None       # dropped: no claim


def _index_file(entries, slots: int, begin: int) -> bytes:
    """An index file built the broker's way: each entry links to the newest older entry of its bucket."""
    newest = [0] * slots
    body = bytearray(F.INDEX_ENTRY_SIZE)           # entry 0 is never written
    for k, (h, off, ts) in enumerate(entries, 1):
        body += ENTRY.pack(h, off, max(0, (ts - begin) // 1000), newest[h % slots])
        newest[h % slots] = k
    head = indexfiles.IDX_HEADER.pack(begin, entries[-1][2], entries[0][1], entries[-1][1],
                                      sum(1 for v in newest if v), len(entries) + 1)
    return head + struct.pack(f">{slots}i", *newest) + bytes(body)


def test_index_check_against_hashes_made_by_the_dispatch_rule():
    from mqtool.rocketmq import dispatch

    x = _noted(MSGS)
    entries = []
    for off, size, topic, qid, qoff, ts, props in MSGS:
        d = dict(p.split("\x01") for p in props.decode().split("\x02"))
        for key in dispatch.index_keys(topic.decode(), d):
            entries.append((dispatch.index_key_hash(key), off, ts))
    slots, begin = 7, MSGS[0][5]
    data = _index_file(entries, slots, begin)
    n = len(entries)
    used = sum(1 for i in range(slots) if struct.unpack_from(">i", data, 40 + 4 * i)[0])
    assert x.index_check(data, slots, n, begin) == (used, 0, 11 * 300, MSGS[-1][5], 0)
    v = native.load("rmqverify")
    assert v.index_chains(data, slots, n) == (used, 0)
    assert x.index_check(data, slots, n, begin, v.index_chains(data, slots, n)) == (used, 0, 11 * 300, MSGS[-1][5], 0)
    assert x.index_check(data, slots, n, begin, False) is None         # the chains said: the Python loops
    assert x.index_check(data, slots, n, begin, (used + 1, 3)) == (used + 1, 0, 11 * 300, MSGS[-1][5], 3)
    for k, change in ((5, lambda e: (e[0] + 1, e[1], e[2])),            # key hash of no key
                      (6, lambda e: (e[0], e[1] + 1, e[2])),            # not a message start
                      (7, lambda e: (e[0], e[1], e[2] + 5000))):        # another time
        bad = list(entries)
        bad[k - 1] = change(bad[k - 1])
        assert x.index_check(_index_file(bad, slots, begin), slots, n, begin) is None, k
        bad_file = _index_file(bad, slots, begin)
        assert x.index_check(bad_file, slots, n, begin, v.index_chains(bad_file, slots, n)) is None, k
    # a slot emptied: its chain's entries are unreachable (a warning, no error): the walk counts them
    i0 = next(i for i in range(slots) if struct.unpack_from(">i", data, 40 + 4 * i)[0])
    chain, cur = 0, struct.unpack_from(">i", data, 40 + 4 * i0)[0]
    while cur:
        chain += 1
        cur = ENTRY.unpack_from(data, 40 + 4 * slots + 20 * cur)[3]
    cut = bytearray(data)
    struct.pack_into(">i", cut, 40 + 4 * i0, 0)
    assert x.index_check(bytes(cut), slots, n, begin) == (used - 1, 0, 11 * 300, MSGS[-1][5], chain)
    assert v.index_chains(bytes(cut), slots, n) == (used - 1, chain)
    assert x.index_check(bytes(cut), slots, n, begin, v.index_chains(bytes(cut), slots, n)) == \
        (used - 1, 0, 11 * 300, MSGS[-1][5], chain)


@pytest.fixture
def part_min():
    """Set the size from which merge(table) keeps a range's table as a part (rmqverify.xref_part_min; 0: every
    merge by reference), restored after."""
    v = native.load("rmqverify")
    before = v.xref_part_min()
    yield v.xref_part_min
    v.xref_part_min(before)


def _queue_units(msgs, topic: bytes, qid: int) -> tuple[int, bytes]:
    """(first queue offset, consumequeue units) of the queue (topic, qid) as the broker dispatches msgs: the unit
    of each message at its queue offset (the last one wins), zero units in between."""
    from mqtool.rocketmq import dispatch

    mine = {m[4]: m for m in msgs if (m[2], m[3]) == (topic, qid)}
    first, last = min(mine), max(mine)
    units = bytearray()
    for qo in range(first, last + 1):
        m = mine.get(qo)
        if m is None:
            units += bytes(CQ.size)
            continue
        tags = dict(p.split("\x01") for p in m[6].decode().split("\x02") if "\x01" in p).get("TAGS", "")
        units += CQ.pack(m[0], m[1], dispatch.tags_code(tags) if tags else 0)
    return first, bytes(units)


_PART_MSG = st.tuples(st.sampled_from([b"A", b"B"]), st.integers(0, 1), st.integers(-3, 4), st.booleans(),
                      st.integers(0, 3))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@given(ranges=st.lists(st.lists(_PART_MSG, max_size=8), min_size=1, max_size=6), data=st.data())
def test_a_table_merged_by_reference_answers_as_one_merged_by_copy(part_min, ranges, data):
    """merge(table) keeps a later range's arrays where they are (parts: queue segments, record tables) instead of
    copying them (from a size on, or once the table has a part: drawn here, 0 makes every merge one by
    reference); merge(export) copies. Over random ranges (queues continued, gaps, offsets going back or jumping,
    messages without keys, empty ranges) both tables give the same cq_check and index_check answers, on the
    units and entries the dispatch rule makes and on damaged ones; stats count the same; export (which copies the
    parts in) gives the same bytes."""
    from mqtool.rocketmq import dispatch

    part_min(data.draw(st.sampled_from([0, 0, 120, 400]), label="part_min"))
    msgs, off, qoffs = [], 1000, {}
    by_table, by_blob = native_lane.new_xref(), native_lane.new_xref()
    for k, rng in enumerate(ranges):
        part = []
        for topic, qid, step, keyed, tag in rng:
            key = (topic, qid)
            qoffs[key] = qoffs.get(key, -1) + (step if step != 4 else 2000)   # 4: a jump past the padding bound
            if qoffs[key] < 0:
                qoffs[key] = 0
            props = _props(TAGS=f"t{tag}", KEYS=f"k{off} shared") if keyed else _props(TAGS=f"t{tag}")
            part.append((off, 100 + tag, topic, qid, qoffs[key], 1_700_000_000_000 + off, props))
            off += 100 + tag + data.draw(st.sampled_from([0, 0, 0, 7]), label="hole")
        msgs += part
        by_blob.merge(_noted(part).export())
        by_table.merge(_noted(part))
    if part_min() == 0:
        assert by_table.stats()["parts"] == max(0, sum(1 for r in ranges if r) - 1)    # the first one taken over
    for k in ("queues", "messages_with_keys", "key_hashes"):
        assert by_table.stats()[k] == by_blob.stats()[k]
    # consumequeue: every queue's units by the dispatch rule, whole and in pieces, shifted, one unit changed
    for topic in (b"A", b"B"):
        for qid in (0, 1):
            if not any((m[2], m[3]) == (topic, qid) for m in msgs):
                assert by_table.cq_check(CQ.pack(1000, 100, 0), 1, 0, False, topic, qid, None) is None
                continue
            first, units = _queue_units(msgs, topic, qid)
            n = len(units) // CQ.size
            cases = [(units, n, first), (units, n, first + 1), (units[CQ.size:], n - 1, first + 1)]
            if n > 1:
                i = data.draw(st.integers(0, n - 1), label="unit")
                bad = bytearray(units)
                CQ.pack_into(bad, i * CQ.size, *data.draw(st.sampled_from(
                    [(1000, 100, 0), (0, 0, 0), (0, F.CQ_BLANK_SIZE, 0), (msgs[-1][0], msgs[-1][1], 5)]), label="b"))
                cases.append((bytes(bad), n, first))
            for buf, count, at in cases:
                for end in (None, off, msgs[-1][0] + 50):
                    assert by_table.cq_check(buf, count, at, False, topic, qid, end) == \
                        by_blob.cq_check(buf, count, at, False, topic, qid, end)
    # index: the entries the dispatch rule makes, in commitlog order, and one changed
    entries = []
    for moff, size, topic, qid, qoff, ts, props in msgs:
        d = dict(p.split("\x01") for p in props.decode().split("\x02"))
        for key in dispatch.index_keys(topic.decode(), d):
            entries.append((dispatch.index_key_hash(key), moff, ts))
    if entries:
        slots, begin = 5, msgs[0][5]
        files = [entries]
        k = data.draw(st.integers(0, len(entries) - 1), label="entry")
        files.append(entries[:k] + [(entries[k][0] + data.draw(st.sampled_from([0, 1])), entries[k][1]
                                     + data.draw(st.sampled_from([0, 1, -1])), entries[k][2])] + entries[k + 1:])
        for es in files:
            f = _index_file(es, slots, begin)
            n = len(es)
            assert by_table.index_check(f, slots, n, begin) == by_blob.index_check(f, slots, n, begin)
            if n > 2:
                chains = native.load("rmqverify").index_chains(f, slots, n)
                half = n // 2
                for a, b in ((1, half), (half + 1, n)):
                    assert by_table.index_check(f, slots, n, begin, chains, False, a, b) == \
                        by_blob.index_check(f, slots, n, begin, chains, False, a, b)
    assert by_table.export() == by_blob.export()
    assert by_table.stats()["parts"] == 0                 # (export copied the parts in)


def test_a_table_merged_by_reference_proves_clean_files_clean(part_min):
    """The hand-built consumequeue and index of test_cq_check_against_units_made_by_the_dispatch_rule /
    test_index_check_against_hashes_made_by_the_dispatch_rule, against the table of MSGS noted in three ranges
    merged by reference (two parts): the same clean answers as from one table."""
    from mqtool.rocketmq import dispatch

    part_min(0)
    x = native_lane.new_xref()
    for part in (MSGS[:4], MSGS[4:5], MSGS[5:]):
        x.merge(_noted(part))
    assert x.stats()["parts"] == 2
    units = b"".join(CQ.pack(off, size, dispatch.tags_code(dict(p.split("\x01") for p in props.decode().split("\x02"))["TAGS"]))
                     for off, size, topic, qid, qoff, ts, props in MSGS)
    topic = "T\u00e9".encode()
    assert x.cq_check(units, 12, 10, False, topic, 1, None) == (True, 21)
    assert x.cq_check(units[20 * 3:], 9, 13, True, topic, 1, None) == (True, 21)       # from inside a part on
    assert x.cq_check(units, 12, 11, False, topic, 1, None) is None
    entries = []
    for off, size, topic_b, qid, qoff, ts, props in MSGS:
        d = dict(p.split("\x01") for p in props.decode().split("\x02"))
        entries += [(dispatch.index_key_hash(k), off, ts) for k in dispatch.index_keys(topic_b.decode(), d)]
    slots, begin, n = 7, MSGS[0][5], len(entries)
    data = _index_file(entries, slots, begin)
    used = sum(1 for i in range(slots) if struct.unpack_from(">i", data, 40 + 4 * i)[0])
    assert x.index_check(data, slots, n, begin) == (used, 0, 11 * 300, MSGS[-1][5], 0)
    assert _noted(MSGS).index_check(data, slots, n, begin) == (used, 0, 11 * 300, MSGS[-1][5], 0)


def test_records_out_of_order_across_parts_are_no_claim(part_min):
    """Key records of a later range at offsets not after an earlier range's (ranges between them holding no keyed
    message): the merged table makes no claim on index files (index_check None), whether merged by reference or
    by copy, even on the index file of exactly the messages noted; in order, both prove that file clean. Many
    small parts, as --split-size makes them."""
    from mqtool.rocketmq import dispatch

    keyed = list(MSGS)
    bare = [(m[0] + 5000, m[1], m[2], m[3], m[4] + 20, m[5], _props(TAGS="x")) for m in MSGS[:2]]
    slots, begin = 7, MSGS[0][5]
    part_min(0)
    for order, clean in (([keyed[:6], [], bare, keyed[6:]], True), ([keyed[6:], bare, keyed[:6]], False),
                         ([keyed[6:], bare, [], bare[:1], keyed[:1]], False),
                         ([keyed[:3], keyed[3:6], bare, keyed[4:5]], False),
                         ([[m] for m in keyed] + [bare], True)):
        by_table, by_blob = native_lane.new_xref(), native_lane.new_xref()
        entries = []
        for part in order:
            by_table.merge(_noted(part))
            by_blob.merge(_noted(part).export())
            for off, size, topic, qid, qoff, ts, props in part:        # the broker's entries, in that order
                d = dict(p.split("\x01") for p in props.decode().split("\x02"))
                entries += [(dispatch.index_key_hash(k), off, ts) for k in dispatch.index_keys(topic.decode(), d)]
        data = _index_file(entries, slots, begin)
        got = by_table.index_check(data, slots, len(entries), begin)
        assert got == by_blob.index_check(data, slots, len(entries), begin)
        assert (got is not None) == clean, order
    assert by_table.stats()["parts"] == len(keyed)


def test_small_tables_are_copied_until_a_large_one_is_kept(part_min):
    """Below the size a table is merged by copy (no part: many small ranges would each keep their arrays); the
    first one at or above it becomes a part, and every later one too (the parts follow X's own records); the
    answers are those of the table merged by copy."""
    from mqtool.rocketmq import dispatch

    part_min(len(MSGS[4:]) * (20 + 22 + 4 * 3))          # MSGS[4:] (8 messages, 3 keys each) is large enough
    x, flat = native_lane.new_xref(), native_lane.new_xref()
    for part, parts in ((MSGS[:2], 0), (MSGS[2:3], 0), (MSGS[3:4], 0), (MSGS[4:], 1)):
        x.merge(_noted(part))
        flat.merge(_noted(part).export())
        assert x.stats()["parts"] == parts
    units = b"".join(CQ.pack(o, sz, dispatch.tags_code(dict(p.split("\x01") for p in pr.decode().split("\x02"))["TAGS"]))
                     for o, sz, t, q, qo, ts, pr in MSGS)
    assert x.cq_check(units, 12, 10, False, "T\u00e9".encode(), 1, None) == (True, 21)
    assert x.export() == flat.export()
