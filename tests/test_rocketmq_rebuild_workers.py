"""rebuild-index's two-step compiled lane (parse ranges in workers, apply them in order) == the Python path.

The lane splits each segment into ranges that worker threads parse into records (what each unit says) while
the main thread applies them in commitlog order (what each unit does to the queues and the index). These tests
rebuild the same store with the helpers off (the reference: ``native.switched(False)``) and with 1, 2 and 3
workers and range sizes from 1 byte up, so range boundaries fall at every kind of place: inside a queue's run
of units, inside a unit, on a BLANK unit and the zero fill after it, on a damaged unit, in the middle of an
index file and where an index file fills up (small geometries make consumequeue and index files roll every
few units). Everything rebuild_store gives is compared: each file's bytes, name, order and whether it is the
last, the findings in order, the counters, the entry times kept for --compare. Where it matters the test also
checks that the helper applied units and that workers' ranges were used (a test that never exercised them
would pass vacuously). Inputs: the fixture store, every real RocketMQ store, hypothesis-built commitlogs
(plain runs mixed with units the lane must hand to Python), damaged copies of a real store.
"""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from formats import rocketmq as F
from mqtool import io
from mqtool.native import switched
from mqtool.options import RebuildOptions
from mqtool.rocketmq import rebuild as R
from mqtool.rocketmq.rebuild import native_lane as RN
from mqtool.rocketmq.store import open_store
from tests.builders import rocketmq_builder, rocketmq_unit
from tests.conftest import require_realdata

REPO = Path(__file__).resolve().parent.parent
FIXTURE_STORE = REPO / "fixtures" / "rocketmq" / "store"
LIB = RN.native_lib()
pytestmark = pytest.mark.skipif(LIB is None or not hasattr(LIB, "parse"),
                                reason="compiled helper rmqrebuild not built (tests/test_common_native.py fails "
                                       "under CI when it is missing)")
HC = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]
T0 = 1_795_338_600_000
SMALL = dict(cq_file_size=60, max_hash_slots=3, max_index_num=5)       # files roll every few units


@pytest.fixture(params=["read", "mapped"])
def reading(request, monkeypatch):
    """Segments read whole (what small files get) or mapped (what large ones get: the workers then populate
    and release the pages of their ranges)."""
    if request.param == "mapped":
        monkeypatch.setattr(io, "READ_WHOLE_LIMIT", 0)
    return request.param


def _real_stores() -> list[Path]:
    root = require_realdata("rocketmq")
    return sorted(p.parent for p in root.glob("*/store/commitlog") if p.is_dir())


class _Counting:
    """The helper, counting the units its apply() dispatched."""

    def __init__(self, lib):
        self.lib, self.applied = lib, 0

    def __getattr__(self, name):
        return getattr(self.lib, name)

    def apply(self, *args):
        r = self.lib.apply(*args)
        self.applied += r[2]
        return r


def _rebuild(store_dir: Path, native: bool, jobs: int = 1, chunk: int | None = None, keep_times: bool = True,
             early: bool = False, **opts) -> tuple[dict, int, dict]:
    """(everything rebuild_store gives, units apply() dispatched, where the applied chunks came from).
    ``early``: the first segment's first ranges are started before the settings are read (as run_rebuild
    does: native_lane.prestart)."""
    store = open_store(store_dir)
    pre = RN.prestart(store.segments, F.DEFAULT_MAX_MESSAGE_SIZE, jobs, chunk) if early and native else None
    if early and native and jobs > 1:       # (a first segment of one range is not started early)
        assert (pre is not None and bool(pre.jobs)) == (store.segments[0].size > (chunk or RN.CHUNK_BYTES))
    sets = R.resolve_settings(RebuildOptions(**opts), store)
    cq, idx, findings = [], [], []

    def on_cq(topic, qid, base, data, last, size):
        cq.append((topic, qid, base, bytes(data), last, size))

    def on_idx(ib, name, last):
        pieces, size = ib.parts()
        idx.append((name, [bytes(p) for p in pieces], size, last, ib.header(),
                    bytes(ib.ts) if ib.ts is not None else None))

    counting = _Counting(LIB)
    states = []
    saved_lib, saved_state = RN.native_lib, RN.SharedState

    def state(*a, **kw):
        s = saved_state(*a, **kw)
        states.append(s)
        return s

    RN.SharedState = state
    if native:
        RN.native_lib = lambda: counting
    try:
        with switched(native):
            res = R.rebuild_store(store, sets, on_cq, on_idx, findings, keep_entry_times=keep_times, jobs=jobs,
                                  chunk_bytes=chunk, prestart=pre)
    finally:
        RN.native_lib, RN.SharedState = saved_lib, saved_state
    chunks = states[0].chunks if states else {"workers": 0, "here": 0, "early": 0}
    return ({"cq": cq, "index": idx, "findings": findings, "result": dataclasses.asdict(res)}, counting.applied,
            chunks)


def _check(want: dict, store_dir: Path, jobs: int, chunk: int | None, keep_times: bool = True, early: bool = False,
           **opts) -> tuple[int, dict]:
    got, used, chunks = _rebuild(store_dir, True, jobs, chunk, keep_times, early, **opts)
    assert got["result"] == want["result"], (jobs, chunk)
    assert got["findings"] == want["findings"], (jobs, chunk)
    assert [c[:3] for c in got["cq"]] == [c[:3] for c in want["cq"]], (jobs, chunk)
    assert got["cq"] == want["cq"], (jobs, chunk)
    assert [i[0] for i in got["index"]] == [i[0] for i in want["index"]], (jobs, chunk)
    assert got["index"] == want["index"], (jobs, chunk)
    return used, chunks


def _sweep(store_dir: Path, chunks=(1, 37, 500, 4096, None), jobs=(1, 2, 3), keep_times: bool = True,
           **opts) -> tuple[int, int]:
    """Every (jobs, range size) against the Python path; (units applied, chunks from workers) summed."""
    want, none, _ = _rebuild(store_dir, False, keep_times=keep_times, **opts)
    assert none == 0
    used = from_workers = 0
    for j in jobs:
        for c in chunks:
            for early in (False, True) if j > 1 else (False,):
                u, ch = _check(want, store_dir, j, c, keep_times, early, **opts)
                used += u
                from_workers += ch["workers"]
                if j == 1:
                    assert ch["workers"] == 0
    return used, from_workers


# ---- the fixture store and every real store --------------------------------------------------------------

def test_fixture_store_every_worker_count_and_range_size(reading):
    used, workers = _sweep(FIXTURE_STORE)
    assert used > 0 and workers > 0
    used, workers = _sweep(FIXTURE_STORE, cq_file_size=100, max_hash_slots=7, max_index_num=9)
    assert used > 0


@pytest.mark.parametrize("geometry", [{}, SMALL, dict(cq_file_size=6_000_000, max_hash_slots=5000,
                                                      max_index_num=20000)])
def test_real_stores_every_worker_count_and_range_size(geometry, reading):
    used = workers = 0
    for store in _real_stores():
        u, w = _sweep(store, chunks=(7, 1000, 40_000, None), jobs=(1, 2, 3), **geometry)
        used += u
        workers += w
    assert used > 2000 and workers > 100


def test_real_stores_without_entry_times_and_without_index(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("messageIndexEnable=false\n")
    used = 0
    for store in _real_stores():
        used += _sweep(store, chunks=(300, None), jobs=(1, 2), keep_times=False)[0]
        used += _sweep(store, chunks=(300, None), jobs=(1, 2), broker_conf=str(conf))[0]
    assert used > 2000


def test_one_page_scan_window_with_workers(monkeypatch):
    import mmap
    from mqtool import pages

    stores = [FIXTURE_STORE] + _real_stores()[:4]
    before = {s: _rebuild(s, False)[0] for s in stores}
    monkeypatch.setattr(pages, "WINDOW", mmap.PAGESIZE)     # apply() stops at every page
    for s, want in before.items():
        _check(want, s, 2, 3000)


# ---- damaged copies of a real store ----------------------------------------------------------------------

_EDIT = st.tuples(st.sampled_from(["set", "insert", "delete"]), st.floats(0, 1), st.binary(min_size=1, max_size=12))


@settings(max_examples=20, deadline=None, suppress_health_check=HC)
@given(st.lists(_EDIT, min_size=1, max_size=4), st.sampled_from([1, 64, 999, 8000]))
def test_damaged_store_every_worker_count(tmp_path_factory, reading, edits, chunk):
    src = require_realdata("rocketmq", "gen-4.9.7-clean", "store")
    dst = tmp_path_factory.mktemp("dmg") / "store"
    shutil.copytree(src / "commitlog", dst / "commitlog")
    seg = sorted((dst / "commitlog").iterdir())[0]
    data = bytearray(seg.read_bytes())
    used = len(data.rstrip(b"\x00"))
    for kind, where, blob in edits:
        at = int(where * max(used - 1, 0))
        if kind == "set":
            data[at:at + len(blob)] = blob
        elif kind == "insert":
            data[at:at] = blob
        else:
            del data[at:at + len(blob)]
    seg.write_bytes(bytes(data))
    _sweep(dst, chunks=(chunk,), jobs=(1, 2, 3), cq_file_size=800, max_hash_slots=100, max_index_num=400)
    _sweep(dst, chunks=(chunk,), jobs=(2,), **SMALL)


# ---- built commitlogs: plain runs with the units the lane hands to Python in between ----------------------

_ODD_TOPICS = [F.SCHEDULE_TOPIC.encode(), "Tö".encode(), b"T\xff", "主题\U0001F600".encode()]
_ODD_PROPS = [b"", b"TAGS\x01", b"KEYS\x01 \x02" + F.PROPERTY_INNER_MULTI_DISPATCH.encode() + b"\x01%LMQ%q",
              b"KEYS\x01\xff\xfe", b"TAGS\x01a\x02KEYS\x01" + b"k " * 300]


@st.composite
def _commitlog(draw) -> tuple[list[bytes], int]:
    """Segments of units (one segment size; a BLANK unit and zero fill at each segment's end): runs of plain
    units of two topics and three queues, with units the lane declines (odd topics and properties, IPv6,
    transactions, v2, queue-offset gaps and repeats, a wrong PHYSICALOFFSET) and damage in between."""
    seg_size = draw(st.sampled_from([1500, 4000, 20_000]))
    n = draw(st.integers(1, 60))
    segs, cur = [], bytearray()
    next_off: dict = {}
    ts = T0
    for i in range(n):
        kind = draw(st.sampled_from(["plain"] * 8 + ["odd-topic", "odd-props", "v6", "tx", "v2", "gap", "phys",
                                                      "damage"]))
        topic = draw(st.sampled_from([b"TopicA", b"TopicB"]))
        qid = draw(st.integers(0, 2))
        qoff = next_off.get((topic, qid), 0)
        sysflag, version, props = 0, "v1", f"TAGS\x01t{i % 3}\x02KEYS\x01k{i} k{i % 4}\x02UNIQ_KEY\x01U{i}".encode()
        phys_shift = 0
        if kind == "odd-topic":
            topic = draw(st.sampled_from(_ODD_TOPICS))
        elif kind == "odd-props":
            props = draw(st.sampled_from(_ODD_PROPS))
        elif kind == "v6":
            sysflag = F.BORNHOST_V6_FLAG
        elif kind == "tx":
            sysflag = draw(st.sampled_from([F.TRANSACTION_PREPARED_TYPE, F.TRANSACTION_ROLLBACK_TYPE,
                                            F.TRANSACTION_COMMIT_TYPE]))
        elif kind == "v2":
            version = "v2"
        elif kind == "gap":
            qoff = draw(st.sampled_from([qoff + 2, max(qoff - 1, 0), 0]))
        elif kind == "phys":
            phys_shift = draw(st.sampled_from([-1, 100]))
        next_off[(topic, qid)] = qoff + 1
        ts += draw(st.sampled_from([0, 1, 999, 1000, 1001, 50_000, -5000]))
        base = len(segs) * seg_size
        unit = bytearray(rocketmq_unit(topic, b"body", props, version=version, sysflag=sysflag,
                                       phys=base + len(cur) + phys_shift, queue_id=qid, queue_offset=qoff,
                                       born="[2001:db8::1]:7" if sysflag & F.BORNHOST_V6_FLAG else "10.1.2.3:7",
                                       store_ts=ts))
        if kind == "damage":
            at = draw(st.integers(0, len(unit) - 1))
            unit[at] ^= draw(st.integers(1, 255))
        if len(cur) + len(unit) + 8 > seg_size:          # the broker's end of file: a BLANK unit, then zeros
            cur += rocketmq_builder().blank(seg_size - len(cur))
            segs.append(bytes(cur.ljust(seg_size, b"\x00")))
            cur = bytearray()
            base = len(segs) * seg_size
            unit = bytearray(rocketmq_unit(topic, b"body", props, version=version, sysflag=sysflag,
                                           phys=base + phys_shift, queue_id=qid, queue_offset=qoff,
                                           born="[2001:db8::1]:7" if sysflag & F.BORNHOST_V6_FLAG else "10.1.2.3:7",
                                           store_ts=ts))
            if len(unit) > seg_size:
                continue
        cur += unit
    segs.append(bytes(cur.ljust(seg_size, b"\x00")))
    return segs, seg_size


_GEOMETRY = st.sampled_from([dict(cq_file_size=100, max_hash_slots=8, max_index_num=6),
                             dict(cq_file_size=20, max_hash_slots=1, max_index_num=2),
                             dict(cq_file_size=400, max_hash_slots=50, max_index_num=1000)])


@settings(max_examples=120, deadline=None, suppress_health_check=HC)
@given(_commitlog(), _GEOMETRY, st.booleans(), st.lists(st.integers(1, 3000), min_size=1, max_size=3))
def test_built_commitlogs_every_worker_count_and_range_size(tmp_path_factory, reading, log, geometry, keep_times,
                                                           chunks):
    segs, size = log
    store = tmp_path_factory.mktemp("built") / "store"
    (store / "commitlog").mkdir(parents=True)
    for i, data in enumerate(segs):
        (store / "commitlog" / f"{i * size:020d}").write_bytes(data)
    _sweep(store, chunks=tuple(chunks), keep_times=keep_times, **geometry)


@pytest.mark.parametrize("odd_every", [0, 7])
def test_plain_run_goes_through_the_workers(tmp_path, reading, odd_every):
    """Long plain runs of two queues in three segments: nearly every unit is applied from a worker's range, and
    each range size gives the Python path's bytes (index files of 50 entries roll inside ranges). With every
    7th unit one Python must dispatch (schedule topic), the workers' ranges go on after each of them."""
    size = 60_000
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    offs = {}
    ts = T0
    for s in range(3):
        cur = bytearray()
        i = 0
        while True:
            topic = b"TopicA" if i % 3 else b"TopicB"
            if odd_every and i % odd_every == 3:
                topic = F.SCHEDULE_TOPIC.encode()
            qoff = offs.get(topic, 0)
            unit = rocketmq_unit(topic, b"x" * (i % 50), f"TAGS\x01t\x02KEYS\x01k{s}-{i}".encode(),
                                 phys=s * size + len(cur), queue_offset=qoff, store_ts=ts)
            if len(cur) + len(unit) + 8 > size:
                break
            cur += unit
            offs[topic] = qoff + 1
            ts += 7
            i += 1
        cur += rocketmq_builder().blank(size - len(cur))
        (store / "commitlog" / f"{s * size:020d}").write_bytes(bytes(cur.ljust(size, b"\x00")))
    used, workers = _sweep(store, chunks=(100, 5000, 20_000), jobs=(2, 3), max_hash_slots=40, max_index_num=50)
    assert used > 1000 and workers > 20
    want = _rebuild(store, False, max_hash_slots=40, max_index_num=50)[0]
    used, chunks = _check(want, store, 2, 5000, max_hash_slots=40, max_index_num=50)
    assert chunks["workers"] >= 30 and chunks["here"] <= 3, chunks    # (3 segments: at most one start each)
    used, early = _check(want, store, 2, 5000, early=True, max_hash_slots=40, max_index_num=50)
    # the next segment's first ranges (jobs + 2 = 4) start when a segment's last one is planned, and with the
    # early start the first segment's too
    assert chunks["early"] == 8 and early["early"] == 12 and early["workers"] == chunks["workers"], (early, chunks)


def test_apply_refuses_what_is_not_a_chunk():
    from array import array

    data = bytes(4096)
    chunk = LIB.parse(data, 0, 100, 4096, 1 << 20, True)          # zeros: no unit, a chunk of nothing
    assert RN._CHUNK_HEAD.unpack_from(chunk)[1] == 0
    for bad in (b"", chunk[:-1], chunk + b"\0", b"x" * len(chunk)):
        with pytest.raises(ValueError):
            LIB.apply(data, bad, 0, 0, 100, array("q"), {}, [], array("q"), None, None, None, None)
    with pytest.raises(ValueError):                                 # a cursor past the records
        LIB.apply(data, chunk, 5, 0, 100, array("q"), {}, [], array("q"), None, None, None, None)
    assert LIB.find_boundary(data, 0, 0, 4096, 4096, 1 << 20) == -1
    for start, limit, end in [(-5, 100, 100), (5000, 6000, 6000), (100, 50, 4096)]:
        c = LIB.parse(data, start, limit, end, 1 << 20, True)
        assert RN._CHUNK_HEAD.unpack_from(c)[1] == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(0, 2 ** 31 - 1))
def test_slot_range_count_compiled_equals_python(data, top):
    """indexfiles' count of slot values outside [0, top] (index geometry inference reads every slot of the
    store's index files): the compiled count == the Python one == a count by hand."""
    from mqtool.rocketmq import indexfiles

    by_hand = sum(1 for i in range(0, len(data) - 3, 4)
                  if not 0 <= int.from_bytes(data[i:i + 4], "big", signed=True) <= top)
    assert LIB.count_outside_be32(data, 0, top) == by_hand
    with switched(False):
        assert indexfiles._count_outside(data, top) == by_hand
    assert indexfiles._count_outside(data, top) == by_hand


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-2 ** 31, 2 ** 31 - 1), max_size=40), st.integers(-2 ** 33, 2 ** 33),
       st.integers(-2 ** 33, 2 ** 33))
def test_slot_range_count_any_bounds(values, lo, hi):
    """count_outside_be32 with any bounds (the int32 fast loop and the general one) == a count by hand."""
    data = b"".join(v.to_bytes(4, "big", signed=True) for v in values) + b"\x7f" * (len(values) % 4)
    assert LIB.count_outside_be32(data, lo, hi) == sum(1 for v in values if not lo <= v <= hi)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(-5, 2 ** 31 - 1)), max_size=40),
       st.integers(1, 3000), st.integers(0, 2 ** 31 - 1), st.integers(-100, 100))
def test_slot_table_count_in_one_pass_equals_the_zero_skipping_walk(tmp_path_factory, values, slots, top, cut):
    """indexfiles._slots_out_of_range: the compiled pass over the whole table in place (a map of a sparse
    file: its holes read as zeros) == the Python walk that skips zero runs and holes (helpers off) == a count
    by hand; also for a file cut short of its table."""
    from mqtool.io import map_input
    from mqtool.rocketmq import indexfiles

    table = [0] * slots
    for at, v in values:
        table[at % slots] = v
    head = F.INDEX_HEADER_SIZE
    size = max(head, head + 4 * slots + cut)
    path = tmp_path_factory.mktemp("slots") / "idx"
    with open(path, "wb") as f:                     # sparse: only the non-zero slots are written
        for i, v in enumerate(table):
            if v:
                f.seek(head + 4 * i)
                f.write(v.to_bytes(4, "big", signed=True))
        f.truncate(size)
    kept = (size - head) // 4
    by_hand = sum(1 for v in table[:kept] if not 0 <= v <= top)
    with map_input(path, whole_limit=0) as mi:
        assert indexfiles._slots_out_of_range(mi.buf, slots, top) == by_hand
        with switched(False):
            assert indexfiles._slots_out_of_range(mi.buf, slots, top) == by_hand


def test_slot_table_layout_is_the_schemas():
    """The index writer keeps the slot table as array('i') and writes it big-endian: the schema's slot type
    (checked here rather than at import, which would cost construct at every start)."""
    from array import array

    assert array("i").itemsize == F.INDEX_SLOT_SIZE == F.IndexSlot.sizeof()
    assert F.IndexSlot.build(-2) == (-2).to_bytes(F.INDEX_SLOT_SIZE, "big", signed=True)


def test_rebuild_lane_starts_without_construct():
    """The rebuild modules and the helper's configuration come from the schema cache: no construct at start."""
    import subprocess
    import sys

    code = ("import sys; from mqtool import schemacache; from mqtool.rocketmq import rebuild; "
            "from mqtool.rocketmq.rebuild import native_lane as RN; RN.native_lib(); "
            "print(schemacache.valid(), 'construct' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO).stdout.split()
    assert out == ["True", "False"]


# ---- the early start (mqtool.__main__ -> entry.start_early -> native_lane.start_early) --------------------

@pytest.mark.parametrize("line", [
    ["rebuild-index", "STORE", "--out", "OUT", "--force"],
    ["rebuild-index", "--out", "OUT", "STORE"],
    ["rebuild-index", "--out=OUT", "STORE", "--json", "--compare", "--trim", "--write-checkpoint"],
    ["rebuild-index", "STORE", "--compare"],
])
def test_early_start_takes_the_store_click_takes(line):
    """The store the early start parses is the one click's parse of the same line gives (click is the
    independent parser here); every other line starts nothing."""
    from mqtool.cli import cli
    from mqtool.entry import rebuild_store_arg

    assert rebuild_store_arg(line) == cli.commands["rebuild-index"].make_context("rebuild-index", line[1:]) \
        .params["store"] == "STORE"
    for other in (line + ["--format", "rocketmq"], line + ["--cq-file-size", "20"], line + ["--"],
                  line + ["OTHER"], line + ["--help"], line + ["-q"], ["rebuild-index", "s3://b/store", "--compare"],
                  ["rebuild-index", "STORE", "--out"], ["rebuild-index"], ["dump", "commitlog", "STORE"]):
        assert rebuild_store_arg(other) is None, other


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_early_start_is_taken_over_and_changes_nothing(tmp_path, monkeypatch, capsys):
    """``python -m mqtool rebuild-index STORE --out DIR`` with ranges small enough that the fixture's first
    segment is many of them: the run takes over the early start's ranges (more than a run's own prestart
    would start) and writes the same files as the Python path."""
    from mqtool.__main__ import main

    monkeypatch.setattr(RN, "CHUNK_BYTES", 128)
    monkeypatch.setattr(RN, "default_jobs", lambda: 2)
    assert open_store(FIXTURE_STORE).segments[0].size > RN.EARLY_RANGES * 128
    states, saved = [], RN.SharedState

    def state(*a, **kw):
        states.append(saved(*a, **kw))
        return states[-1]

    monkeypatch.setattr(RN, "SharedState", state)
    trees = []
    for native in (False, True):
        out = tmp_path / f"out-{native}"
        with switched(native), pytest.raises(SystemExit) as e:
            main(["rebuild-index", str(FIXTURE_STORE), "--out", str(out), "--json"])
        assert e.value.code == 0 and RN._early is None
        trees.append(_tree(out))
    capsys.readouterr()
    assert trees[0] == trees[1] and any(k.startswith("index/") for k in trees[0]) and len(trees[0]) > 3
    assert states[-1].chunks["early"] >= RN.EARLY_RANGES > 4 * (RN.default_jobs() + 2)   # (4 segments)


def test_early_start_of_another_store_is_ended(tmp_path, monkeypatch):
    """A run whose first segment is not the early start's file starts its own ranges; the early ones are
    ended (their map closed); a path that is no store starts nothing and raises nothing."""
    monkeypatch.setattr(RN, "CHUNK_BYTES", 128)
    monkeypatch.setattr(RN, "default_jobs", lambda: 2)
    other = tmp_path / "store"
    shutil.copytree(FIXTURE_STORE / "commitlog", other / "commitlog")
    RN.start_early(str(FIXTURE_STORE))
    early = RN._early
    assert early is not None and len(early.jobs) == RN.EARLY_RANGES
    pre = RN.prestart(open_store(other).segments, F.DEFAULT_MAX_MESSAGE_SIZE)
    try:
        assert pre is not None and pre is not early and early._map is None and RN._early is None
        assert len(pre.jobs) == 2 + 2
    finally:
        pre.close()
    RN.start_early(str(tmp_path / "nothing-here"))
    assert RN._early is None
    RN.drop_early()
