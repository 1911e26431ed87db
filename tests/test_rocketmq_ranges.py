"""Byte-range splitting: the union over ranges equals the whole-segment scan, for any split size; --jobs N
gives the same dump rows and verify findings as one process (real stores and damaged copies)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from builders import damage_segments
from conftest import realdata_root, require_realdata, rocketmq_store_copy
from mqtool.options import DumpOptions, ScanStats, VerifyOptions
from mqtool.ranges import InlineRunner, PoolRunner, split_segments
from mqtool.rocketmq import ranges as R
from mqtool.rocketmq.store import open_store
from mqtool.rocketmq.ops import dump
from mqtool.rocketmq.records import Blank, Message
from mqtool.rocketmq.scan import Damage, End, scan_store_segments
from mqtool.rocketmq.verify import verify_store

ROOT = Path(__file__).resolve().parent.parent
STORES = sorted(p.parent.name for p in realdata_root().glob("rocketmq/*/store")) \
    if realdata_root().exists() else ["gen-4.9.7-clean"]


def ev_key(ev):
    """Everything an event says, as a comparable tuple."""
    if isinstance(ev, Message):
        return ("m", ev.file, ev.position, ev.offset, ev.size, ev.physical_offset, ev.crc_ok, ev.topic_raw)
    if isinstance(ev, Blank):
        return ("b", ev.file, ev.position, ev.size)
    if isinstance(ev, Damage):
        return ("d", ev.file, ev.position, ev.length, ev.code, ev.message)
    if isinstance(ev, End):
        return ("e", ev.file, ev.position, ev.reason, ev.trailing_nonzero)
    raise AssertionError(ev)


def whole(store_path) -> list:
    return [ev_key(e) for e in scan_store_segments(open_store(store_path).segments)]


def by_ranges(store_path, split) -> list:
    out = []
    for rng in R.plan(store_path, split):
        out.extend(ev_key(e) for e in R.range_events(rng))
    return out


def test_plan_covers_every_byte_once():
    store = require_realdata("rocketmq", "gen-4.9.7-kill", "store")
    segs = open_store(store).segments
    for split in (64, 1000, 1024, 65536, 1 << 27):
        rs = R.plan(store, split)
        for s in segs:
            mine = [r for r in rs if r.file == s.path]
            assert mine[0].start == 0 and mine[-1].stop == s.size
            assert all(a.stop == b.start for a, b in zip(mine, mine[1:]))
            assert all(0 < r.length <= split for r in mine)
        assert [r.index for r in rs] == list(range(len(rs)))
    with pytest.raises(ValueError):
        R.plan(store, 10)


@pytest.mark.parametrize("name", STORES)
@pytest.mark.parametrize("split", [1024, 1000, 4096, 65536])
def test_union_of_ranges_is_the_whole_scan(name, split):
    store = require_realdata("rocketmq", name, "store")
    assert by_ranges(store, split) == whole(store)


def test_union_on_fixture_store():
    store = ROOT / "fixtures" / "rocketmq" / "store"
    ref = whole(store)
    for split in (64, 97, 512, 1024, 3000):
        assert by_ranges(store, split) == ref


@settings(max_examples=25, deadline=None)
@given(split=st.integers(64, 70000), name=st.sampled_from(STORES))
def test_union_for_random_split_sizes(split, name):
    store = require_realdata("rocketmq", name, "store")
    assert by_ranges(store, split) == whole(store)


# ---- damaged copies: every range still starts where the whole scan would be -----------------------

def test_union_on_damaged_store(tmp_path):
    store = rocketmq_store_copy(tmp_path)
    damage_segments(store)
    ref = whole(store)
    assert any(k[0] == "d" for k in ref)
    for split in (64, 100, 1000, 1024, 4096, 7777, 65536):
        assert by_ranges(store, split) == ref, split


_MUT_CACHE = {}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(muts=st.lists(st.tuples(st.integers(0, 65535), st.integers(0, 255)), min_size=1, max_size=20),
       cut=st.integers(0, 65536), split=st.integers(64, 9000))
def test_union_on_mutated_segment(tmp_path_factory, muts, cut, split):
    if "seg" not in _MUT_CACHE:
        _MUT_CACHE["seg"] = require_realdata("rocketmq", "gen-4.9.7-clean", "store", "commitlog",
                                             "00000000000000065536").read_bytes()
    data = bytearray(_MUT_CACHE["seg"])
    for pos, val in muts:
        data[pos] = val
    d = tmp_path_factory.mktemp("mut") / "commitlog"
    d.mkdir()
    (d / "00000000000000065536").write_bytes(bytes(data[:cut]))
    assert by_ranges(d, split) == whole(d)


# ---- dump --jobs ------------------------------------------------------------------------------------

def dump_rows(store, **kw):
    stats = ScanStats()
    cols, rows, title = dump("commitlog", store, DumpOptions(**kw), stats)
    return list(rows), stats


@pytest.mark.parametrize("name", ["gen-5.1.4-clean", "gen-4.9.7-kill", "apache-rocketmq-fork-4e25b979"])
def test_dump_pool_equals_one_process(name):
    store = require_realdata("rocketmq", name, "store")
    ref, s1 = dump_rows(store, body="base64")
    got, s2 = dump_rows(store, body="base64", jobs=2, split_size=1024)
    assert got == ref and s2.messages == s1.messages == len(ref)


def test_dump_filters_with_ranges(tmp_path):
    store = rocketmq_store_copy(tmp_path, "gen-4.9.7-clean")
    damage_segments(store)
    for kw in ({"topic": "TopicB"}, {"key": "orderA-7"}, {"include_blank": True},
               {"from_offset": 70000, "to_offset": 200000}):
        ref, s1 = dump_rows(store, **kw)
        got, s2 = dump_rows(store, jobs=2, split_size=3000, **kw)
        assert got == ref, kw
        assert s2.notes == s1.notes and s2.damaged == s1.damaged


def test_inline_runner_equals_pool():
    store = require_realdata("rocketmq", "gen-5.1.4-kill", "store")
    ref, _ = dump_rows(store)
    got, _ = dump_rows(store, runner=InlineRunner(), split_size=777)
    assert got == ref


def test_pool_runner_keeps_order():
    out = list(PoolRunner(2, window=3).imap(abs, range(-50, 0)))
    assert out == [abs(i) for i in range(-50, 0)]


# ---- verify --jobs --------------------------------------------------------------------------------

def run_verify(store, part="store", **kw):
    findings, summary_fn = verify_store(open_store(store), part, VerifyOptions(**kw))
    return [f.to_dict() for f in findings], summary_fn().to_dict()


@pytest.mark.parametrize("name", STORES)
def test_verify_pool_equals_one_process(name):
    store = require_realdata("rocketmq", name, "store")
    ref = run_verify(store)
    assert run_verify(store, jobs=2, split_size=1024) == ref


def test_verify_pool_on_damaged_store(tmp_path):
    store = rocketmq_store_copy(tmp_path)
    damage_segments(store)
    ref = run_verify(store)
    assert ref[1]["errors"] > 3 and ref[1]["skipped_ranges"] >= 3
    codes = {f["code"] for f in ref[0]}
    assert "physical-offset-mismatch" in codes
    for split in (512, 4096, 65536):
        assert run_verify(store, jobs=2, split_size=split) == ref, split
    assert run_verify(store, part="commitlog", runner=InlineRunner(), split_size=999) == \
        run_verify(store, part="commitlog")


def test_verify_pool_queue_offset_continuity(tmp_path):
    """A message removed from the middle: the queue-offset gap is seen across a range boundary."""
    store = rocketmq_store_copy(tmp_path, "gen-4.9.7-clean")
    segs = open_store(store).segments
    ms = [e for e in scan_store_segments(segs[1:2]) if isinstance(e, Message) and e.topic == "TopicA"]
    victim = ms[len(ms) // 2]
    data = bytearray(Path(victim.file).read_bytes())
    # turn the victim into a rollback (not dispatched) message: its queue offset goes missing
    from formats import rocketmq as F
    sf = victim.sys_flag | F.TRANSACTION_ROLLBACK_TYPE
    data[victim.position + 36:victim.position + 40] = sf.to_bytes(4, "big", signed=True)
    Path(victim.file).write_bytes(data)
    ref = run_verify(store, part="commitlog")
    gaps = [f for f in ref[0] if f["code"] == "queue-offset-gap"]
    assert gaps, "the edit must leave a gap"
    for split in (victim.position - 10, victim.position + victim.size + 1, 1024):
        if split >= 64:
            assert run_verify(store, part="commitlog", jobs=2, split_size=split) == ref


def test_verify_salvage_with_jobs(tmp_path):
    store = rocketmq_store_copy(tmp_path)
    damage_segments(store)
    a = run_verify(store, salvage_out=str(tmp_path / "s1"))
    b = run_verify(store, salvage_out=str(tmp_path / "s2"), jobs=2, split_size=2048)
    strip = lambda r: {k: v for k, v in r[1].items() if k != "salvage_file"}   # noqa: E731
    assert a[0] == b[0] and strip(a) == strip(b)
    assert (tmp_path / "s1" / "salvaged-messages.ndjson").read_bytes() == \
        (tmp_path / "s2" / "salvaged-messages.ndjson").read_bytes()


def test_cli_jobs_same_output(run_cli, tmp_path):
    store = rocketmq_store_copy(tmp_path, "gen-4.9.7-clean")
    damage_segments(store)
    c1, o1, e1 = run_cli("dump", "commitlog", store, "--json", "--jobs", "1")
    c2, o2, e2 = run_cli("dump", "commitlog", store, "--json", "--jobs", "2", "--split-size", "2K")
    assert (c1, o1, e1) == (c2, o2, e2) and c1 == 1 and o1.count("\n") > 100
    v1 = run_cli("verify", "store", store, "--json", "--jobs", "1")
    v2 = run_cli("verify", "store", store, "--json", "-j", "2", "--split-size", "4096")
    assert v1 == v2 and v1[0] == 1
    assert json.loads(v1[1].splitlines()[-1])["kind"] == "summary"
    code, out, err = run_cli("dump", "commitlog", store, "--split-size", "12")
    assert code == 2 and "split size" in err


@pytest.mark.parametrize("to", ["file", "pipe"])
def test_dump_jobs_workers_write_straight_to_the_output(tmp_path, monkeypatch, to):
    """`dump --json -j 2`: the workers write their ranges to spool pieces that go to stdout in order (a file or
    a pipe): the bytes, notes and exit code of --jobs 1, and no piece left behind."""
    import subprocess
    import sys

    store = rocketmq_store_copy(tmp_path, "gen-4.9.7-clean")
    damage_segments(store)
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    env = dict(os.environ, TMPDIR=str(scratch), PYTHONPATH=str(ROOT))
    # the pool path hands pieces, not lines, to the writer
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    stats = ScanStats()
    _c, rows, _t = dump("commitlog", store, DumpOptions(jobs=2, split_size=2048, ndjson=True), stats)
    first = next(iter(rows))
    assert type(first).__name__ == "Spooled" and first.count > 0
    assert len(list(scratch.iterdir())) == 1
    rows.close()
    assert list(scratch.iterdir()) == []

    def run(*jobs):
        argv = [sys.executable, "-m", "mqtool", "dump", "commitlog", str(store), "--json", *jobs]
        if to == "file":
            with (tmp_path / "out.ndjson").open("wb") as f:
                p = subprocess.run(argv, stdout=f, stderr=subprocess.PIPE, env=env, cwd=ROOT, timeout=120)
            return p.returncode, (tmp_path / "out.ndjson").read_bytes(), p.stderr
        p = subprocess.run(argv, capture_output=True, env=env, cwd=ROOT, timeout=120)
        return p.returncode, p.stdout, p.stderr

    ref = run("--jobs", "1")
    got = run("--jobs", "2", "--split-size", "2K")
    assert got == ref and ref[0] == 1 and ref[1].count(b"\n") > 100
    assert list(scratch.iterdir()) == []


def test_split_segments_empty_segment():
    class S:
        path, name, base, size = "/x/00000000000000000000", "00000000000000000000", 0, 0
    rs = split_segments("rocketmq", "/x", [S()], 1024)
    assert len(rs) == 1 and rs[0].start == rs[0].stop == 0


def test_pool_runner_with_threads_uses_a_safe_start_method():
    import threading

    ev = threading.Event()
    t = threading.Thread(target=ev.wait, daemon=True)
    t.start()
    try:
        assert list(PoolRunner(2).imap(abs, range(-5, 0))) == [5, 4, 3, 2, 1]
    finally:
        ev.set()
        t.join()


def test_export_local_reports_damage(run_cli, tmp_path):
    pytest.importorskip("pyarrow")
    store = rocketmq_store_copy(tmp_path, "gen-4.9.7-clean")
    damage_segments(store)
    code, out, err = run_cli("export", store, "--to", tmp_path / "out.parquet")
    assert code == 1 and "damaged range" in err
    from mqtool.export import read_dataset

    t = read_dataset(tmp_path / "out.parquet", R.ROW_FIELDS, ["store", "topic"])
    assert t.num_rows == len(dump_rows(store)[0])


def test_no_orphan_workers_when_the_reader_goes_away(tmp_path):
    """`dump -j 2 | head -1`: the parent dies of SIGPIPE; its pool workers must not linger."""
    import subprocess
    import sys
    import time

    store = rocketmq_store_copy(tmp_path, "gen-4.9.7-clean")
    cmd = f"'{sys.executable}' -m mqtool dump commitlog '{store}' -j 2 --split-size 1K --json | head -1"
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.stdout.count("\n") == 1
    for _ in range(100):            # wait (bounded) for the workers to notice
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        if str(store) not in ps:
            break
        time.sleep(0.1)
    assert str(store) not in ps


@pytest.mark.parametrize("runner", ["inline", "jobs"])
def test_verify_ranges_with_their_items_spilled(tmp_path, monkeypatch, runner):
    """A range task's findings and markers go to a file past a few (mqtool.io.SpillList: bounded memory when
    every message makes a finding): the merge reads them back in order, findings and salvage rows equal the
    one-process run's; handed to a worker process they travel as a list."""
    from mqtool import io as mio

    store = rocketmq_store_copy(tmp_path)
    damage_segments(store)
    ref = run_verify(store, salvage_out=str(tmp_path / "s1"))
    monkeypatch.setattr(mio, "SPILL_LIST_LIMIT", 3)
    kw = {"runner": InlineRunner()} if runner == "inline" else {"jobs": 2}
    got = run_verify(store, salvage_out=str(tmp_path / "s2"), split_size=2048, **kw)
    strip = lambda r: {k: v for k, v in r[1].items() if k != "salvage_file"}   # noqa: E731
    assert got[0] == ref[0] and strip(got) == strip(ref) and len(ref[0]) > 3
    assert (tmp_path / "s1" / "salvaged-messages.ndjson").read_bytes() == \
        (tmp_path / "s2" / "salvaged-messages.ndjson").read_bytes()
