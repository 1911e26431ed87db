"""rebuild-index with the compiled dispatch loop (mqtool/_native/rmqrebuild.c) == without it.

Every comparison runs the same rebuild twice, the compiled helpers on and off (``native.switched``), and compares everything it
gives: each consumequeue and index file (bytes, names, order, whether last), the findings in order, the
result counters, the per-entry store times kept for --compare; and, through the CLI, the whole output tree
and the --compare findings. Inputs: the fixture store, every real RocketMQ store, hypothesis-built
commitlogs full of the units the helper must decline (schedule topic, multi-dispatch, empty values,
non-ASCII, v2, IPv6, transactions, queue-offset gaps/repeats/zero, shifted offsets, tiny file geometry so
files roll all the time), hypothesis-damaged copies of a real store, and a one-page scan window. Where it
matters the helper must have consumed units (a test that never exercised it would pass vacuously).
"""
from __future__ import annotations

import dataclasses
import hashlib
import mmap
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from formats import rocketmq as F
from formats.common import java_string_hash
from mqtool import pages
from mqtool.native import switched
from mqtool.options import RebuildOptions
from mqtool.rocketmq import dispatch as D
from mqtool.rocketmq import rebuild as R
from mqtool.rocketmq.rebuild import native_lane as RN
from mqtool.rocketmq.store import open_store
from tests.builders import rocketmq_unit
from tests.conftest import require_realdata

REPO = Path(__file__).resolve().parent.parent
FIXTURE_STORE = REPO / "fixtures" / "rocketmq" / "store"
LIB = R.native_lib()
pytestmark = pytest.mark.skipif(LIB is None, reason="compiled helper rmqrebuild not built (tests/test_common_native.py "
                                                    "fails under CI when it is missing)")
HC = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large]
T0 = 1_795_338_600_000


def _real_stores() -> list[Path]:
    root = require_realdata("rocketmq")
    return sorted(p.parent for p in root.glob("*/store/commitlog") if p.is_dir())


class _Counting:
    """The helper, counting the units its apply() dispatched (the helper's one lane: parse, then apply)."""

    def __init__(self, lib):
        self.lib, self.units, self.calls = lib, 0, 0

    def __getattr__(self, name):
        return getattr(self.lib, name)

    def apply(self, *args):
        r = self.lib.apply(*args)
        self.calls += 1
        self.units += r[2]
        return r


def _rebuild(store_dir: Path, native: bool, keep_times: bool = True, **opts) -> tuple[dict, int]:
    """(everything rebuild_store gives, units the helper dispatched)."""
    store = open_store(store_dir)
    sets = R.resolve_settings(RebuildOptions(**opts), store)
    cq, idx, findings = [], [], []

    def on_cq(topic, qid, base, data, last, size):
        cq.append((topic, qid, base, bytes(data), last, size))

    def on_idx(ib, name, last):
        count = ib.index_count
        view = ib.prefix_view(count // 2) if keep_times and count > 2 else None
        pieces, size = ib.parts()                   # not to_bytes(): default geometry is a 420 MB file
        idx.append((name, [bytes(p) for p in pieces], size, last, ib.header(),
                    bytes(ib.ts) if ib.ts is not None else None, view))

    counting = _Counting(LIB)
    saved = RN.native_lib
    if native:
        RN.native_lib = lambda: counting
    try:
        with switched(native):
            res = R.rebuild_store(store, sets, on_cq, on_idx, findings, keep_entry_times=keep_times)
    finally:
        RN.native_lib = saved
    return {"cq": cq, "index": idx, "findings": findings, "result": dataclasses.asdict(res)}, counting.units


def _same(store_dir: Path, **opts) -> int:
    """Assert native == Python for ``store_dir``; returns the units the helper dispatched."""
    want, none = _rebuild(store_dir, False, **opts)
    got, used = _rebuild(store_dir, True, **opts)
    assert none == 0
    assert got["result"] == want["result"]
    assert got["findings"] == want["findings"]
    assert [c[:3] for c in got["cq"]] == [c[:3] for c in want["cq"]]
    assert got["cq"] == want["cq"]
    assert [i[0] for i in got["index"]] == [i[0] for i in want["index"]]
    assert got["index"] == want["index"]
    return used


# ---- the hash ----------------------------------------------------------------------------------------

@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(st.characters(max_codepoint=127), max_size=100), st.text(max_size=60),
                 st.text(st.characters(min_codepoint=0x10000), max_size=8)))
def test_c_java_hash_equals_python(s):
    """UTF-16 code units of the decoded text, astral characters as surrogate pairs."""
    assert LIB.java_hash_utf8(s.encode()) == D.java_hash(s) == java_string_hash(s)
    if s:
        assert D.tags_code(s) == LIB.java_hash_utf8(s.encode())


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=24))
def test_c_java_hash_declines_what_python_would_replace(b):
    try:
        text = b.decode("utf-8")
    except UnicodeDecodeError:
        assert LIB.java_hash_utf8(b) is None
    else:
        assert LIB.java_hash_utf8(b) == D.java_hash(text)


@pytest.mark.parametrize("bad", [b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe0\x9f\xbf", b"a\xe2\x82",
                                 b"\xf0\x9f\x98", b"\x80", b"\xff"])
def test_c_java_hash_declines_overlong_surrogate_and_truncated(bad):
    assert LIB.java_hash_utf8(bad) is None


_PROP_PARTS = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", F.PROPERTY_INNER_MULTI_DISPATCH, "TAGSX", "a", "x y", "é",
                                "", "\x01", "\x02"])
_PROP_NAMES = (b"TAGS", b"KEYS", b"UNIQ_KEY", F.PROPERTY_INNER_MULTI_DISPATCH.encode())


@settings(max_examples=800, deadline=None)
@given(st.lists(_PROP_PARTS, max_size=14).map("".join))
def test_the_one_property_splitter_both_ways(text):
    """rmqunit.h rmq_props: skipping empty values it is the broker's map (verify's cross-check table: the last
    non-empty pair wins, dispatch.props_dict); keeping them it is the last pair of each name, empty or not
    (rebuild's fast path, which leaves a message with an empty value or a multi-dispatch pair to the full
    parse), and whenever neither occurs that is dispatch.quick_props' answer."""
    data = text.encode()
    d = D.props_dict(text)
    assert LIB.split_props(data, _PROP_NAMES, True) == tuple(
        d[n.decode()].encode() if n.decode() in d else None for n in _PROP_NAMES)
    last = {}
    for pair in text.split(F.PROPERTY_SEPARATOR):
        name, nv, value = pair.partition(F.NAME_VALUE_SEPARATOR)
        if nv:
            last[name] = value
    got = LIB.split_props(data, _PROP_NAMES, False)
    assert got == tuple(last[n.decode()].encode() if n.decode() in last else None for n in _PROP_NAMES)
    if got[3] is None and b"" not in got:
        assert D.quick_props(text) == tuple(None if g is None else g.decode() for g in got[:3])


def test_layout_comes_from_the_schema():
    named = R.native_layout()                      # by name: rmqcore.rebuild.configure(**named)
    assert named["cq_unit_size"] == F.CqUnit.sizeof() and named["index_entry_size"] == F.IndexEntry.sizeof()
    assert set(named["cq_unit"]) == {"offset", "size", "tagsCode"}
    assert set(named["index_entry"]) == {"keyHash", "phyOffset", "timeDiff", "prevIndex"}
    assert (named["tags"], named["keys"], named["uniq"]) == (b"TAGS", b"KEYS", b"UNIQ_KEY")
    with pytest.raises(ValueError):                # a layout that does not fit is refused, not used
        LIB.configure(**{**named, "cq_unit": {**named["cq_unit"], "size": (4096, 4)}})
    with pytest.raises(ValueError):                # a field missing
        LIB.configure(**{**named, "index_entry": {k: v for k, v in named["index_entry"].items() if k != "keyHash"}})
    LIB.configure(**named)


# ---- real data and the fixture store ------------------------------------------------------------------

def test_fixture_store_native_equals_python():
    assert _same(FIXTURE_STORE) > 0
    assert _same(FIXTURE_STORE, cq_file_size=100, max_hash_slots=7, max_index_num=9) > 0


@pytest.mark.parametrize("geometry, least", [
    ({}, 2000),
    ({"cq_file_size": 60, "max_hash_slots": 3, "max_index_num": 5}, 300),     # files roll every few units
    ({"cq_file_size": 6_000_000, "max_hash_slots": 5000, "max_index_num": 20000}, 2000)])
def test_real_stores_native_equals_python(geometry, least):
    used = sum(_same(store, **geometry) for store in _real_stores())
    assert used > least


def test_real_stores_without_entry_times_and_without_index(tmp_path):
    for store in _real_stores():
        _same(store, keep_times=False)
    conf = tmp_path / "broker.conf"
    conf.write_text("messageIndexEnable=false\n")
    assert sum(_same(s, broker_conf=str(conf)) for s in _real_stores()) > 1000


def test_one_page_window_changes_nothing(monkeypatch):
    before = {s: _rebuild(s, True)[0] for s in [FIXTURE_STORE] + _real_stores()}
    monkeypatch.setattr(pages, "WINDOW", mmap.PAGESIZE)     # the helper stops at every page
    for s, want in before.items():
        got, used = _rebuild(s, True)
        assert got == want and used > 0


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _cli_both(run_cli, store: Path, tmp: Path, *args) -> None:
    """The CLI's whole output tree and --compare findings, native on and off."""
    outs = []
    for native in (False, True):
        with switched(native):
            out = tmp / f"out-{native}"
            code, stdout, err = run_cli("rebuild-index", store, "--out", out, "--force", "--write-checkpoint",
                                        "--json", *args)
            ccode, cmp_out, _ = run_cli("rebuild-index", store, "--compare", "--json", *args)
        rows = [r for r in stdout.splitlines() + cmp_out.splitlines() if '"seconds"' not in r]
        outs.append((code, ccode, rows, _tree(out)))
    assert outs[0] == outs[1]
    assert outs[1][3]


@pytest.mark.parametrize("args", [[], ["--cq-file-size", "100", "--max-hash-slots", "5", "--max-index-num", "7"]])
def test_cli_output_tree_native_equals_python(run_cli, tmp_path, args):
    for i, store in enumerate([FIXTURE_STORE] + _real_stores()):
        _cli_both(run_cli, store, tmp_path / str(i), *args)


# ---- damaged copies of a real store ----------------------------------------------------------------------

_EDIT = st.tuples(st.sampled_from(["set", "insert", "delete"]), st.floats(0, 1), st.binary(min_size=1, max_size=12))


@settings(max_examples=25, deadline=None, suppress_health_check=HC)
@given(st.lists(_EDIT, min_size=1, max_size=4))
def test_damaged_store_native_equals_python(tmp_path_factory, edits):
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
    _same(dst, cq_file_size=800, max_hash_slots=100, max_index_num=400)     # the store's own geometry
    _same(dst, cq_file_size=60, max_hash_slots=3, max_index_num=5)


# ---- commitlogs built from the schema, full of units the helper must decline ---------------------------

_TOPICS = ["T", "Topic-A", "Topic-A", "Topic-A", F.SCHEDULE_TOPIC, "Tö", "主题\U0001F600", "%RETRY%g", "a/b"]
_NAMES = ["TAGS", "KEYS", "UNIQ_KEY", "TAGS", "KEYS", "UNIQ_KEY", F.PROPERTY_INNER_MULTI_DISPATCH,
          F.PROPERTY_INNER_MULTI_QUEUE_OFFSET, "DELAY", "a", "TAGSX", "KEY"]
_VALUES = ["", "x", "k1 k2", " k3  ", "ü", "标签", "键1 \U0001F600k", "%LMQ%q,%LMQ%r", "0,5", "1", "3", "Aa", "BB",
           "polygenelubricants",
           "k\x01v", "7F0000010001" + "A" * 20]


@st.composite
def _props(draw) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=40))
    pairs = draw(st.lists(st.tuples(st.sampled_from(_NAMES), st.sampled_from(_VALUES)), max_size=6))
    text = "\x02".join(f"{n}\x01{v}" for n, v in pairs)
    if draw(st.booleans()):
        text += "\x02"
    return text.encode()


@st.composite
def _commitlog(draw) -> bytes:
    n = draw(st.integers(1, 40))
    data = bytearray()
    next_off: dict[tuple, int] = {}
    ts = T0
    for _ in range(n):
        version = draw(st.sampled_from(["v1", "v1", "v1", "v2"]))
        sysflag = draw(st.sampled_from([0, 0, 0, 0, 0x4, 0x8, 0xC, 0x10, 0x2]))
        topic = draw(st.sampled_from(_TOPICS)).encode()
        qid = draw(st.integers(0, 2))
        k = (topic, qid)
        qoff = next_off.get(k, draw(st.sampled_from([0, 0, 3, 11])))
        qoff = draw(st.sampled_from([qoff] * 6 + [qoff + 2, max(qoff - 1, 0), 0]))
        next_off[k] = qoff + 1
        ts += draw(st.sampled_from([0, 1, 999, 1000, 1001, 50_000, -5000]))
        props = draw(_props())
        body = b"body"
        born = "[2001:db8::1]:7" if sysflag & 0x10 else "10.1.2.3:7"
        phys = len(data) + draw(st.sampled_from([0] * 8 + [-1, 100]))
        data += rocketmq_unit(topic, body, props, version=version, sysflag=sysflag, phys=phys, queue_id=qid,
                              queue_offset=qoff, born=born, store="10.0.0.5:10911", born_ts=T0, store_ts=ts,
                              body_crc=0)
    return bytes(data)


_GEOMETRY = st.sampled_from([dict(cq_file_size=100, max_hash_slots=8, max_index_num=6),
                             dict(cq_file_size=20, max_hash_slots=1, max_index_num=2),
                             dict(cq_file_size=400, max_hash_slots=50, max_index_num=1000)])


@settings(max_examples=150, deadline=None, suppress_health_check=HC)
@given(_commitlog(), _GEOMETRY, st.booleans())
def test_built_commitlogs_native_equal_python(tmp_path_factory, data, geometry, keep_times):
    store = tmp_path_factory.mktemp("built") / "store"
    (store / "commitlog").mkdir(parents=True)
    (store / "commitlog" / f"{0:020d}").write_bytes(data + bytes(64))
    _same(store, keep_times=keep_times, **geometry)


@pytest.mark.parametrize("topic_a, tag, k", [("Topic-A", "t", "k"), ("主题-A", "标签", "键\U0001F600")])
def test_built_commitlog_of_plain_units_goes_through_the_helper(tmp_path, topic_a, tag, k):
    """Sequential plain units, two topics: after the first unit of each queue every unit is the helper's,
    non-ASCII (and astral) topic, tags and keys included; a key whose topic#key hash is Integer.MIN_VALUE
    (index hash 0)."""
    key = _key_with_min_hash(topic_a + "#")
    assert java_string_hash(topic_a + "#" + key) == -2 ** 31 and D.index_key_hash(topic_a + "#" + key) == 0
    data = bytearray()
    for i in range(300):
        topic = topic_a.encode() if i % 3 else b"T"
        props = f"TAGS\x01{tag}{i % 5}\x02KEYS\x01{k}{i} {key} \x02UNIQ_KEY\x01U{i:08d}".encode()
        data += rocketmq_unit(topic, b"body", props, phys=len(data), queue_offset=(2 * i) // 3 if i % 3 else i // 3,
                              born="10.1.2.3:7", store="10.0.0.5:10911", born_ts=T0, store_ts=T0 + i * 700, body_crc=0)
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    (store / "commitlog" / f"{0:020d}").write_bytes(bytes(data) + bytes(64))
    assert _same(store, max_hash_slots=1000, max_index_num=2000) >= 298
    assert _same(store, cq_file_size=200, max_hash_slots=13, max_index_num=50) > 250
    out, _ = _rebuild(store, True, max_hash_slots=1000, max_index_num=2000)
    entries = out["index"][0][1][2]
    hashes = {struct.unpack_from(">i", entries, k * 20)[0] for k in range(1, 900)}
    assert 0 in hashes


def _key_with_min_hash(prefix: str) -> str:
    """A printable ASCII key with hashCode(prefix + key) == Integer.MIN_VALUE: h(p + x + y) =
    h(p + x)·31^4 + h(y); search x until the 4-char y needed can be written in printable digits."""
    target = 0x80000000
    for i in range(1 << 22):
        x = f"{i:x}"
        need = (target - (java_string_hash(prefix + x) & 0xFFFFFFFF) * 31 ** 4) % 2 ** 32
        digits = []
        v = need
        for _ in range(3):
            c = 33 + (v - 33) % 31                    # a low digit in 33..63 (no space: KEYS splits on it)
            digits.append(c)
            v = (v - c) // 31
        if 33 <= v <= 126:                            # the top digit takes the rest
            return x + "".join(map(chr, [v] + digits[::-1]))
    raise AssertionError("no key found")


def test_apply_with_nonsense_bounds_consumes_nothing():
    """A limit at or before the walk's position, a position that is no unit of the chunk, wrong argument types:
    nothing applied, no state touched."""
    from array import array

    data = bytearray()
    for i in range(3):
        data += rocketmq_unit(b"T", b"body", b"TAGS\x01t\x02KEYS\x01k%d" % i, phys=len(data), queue_offset=i,
                              store_ts=T0 + i)
    data = bytes(data) + bytes(64)
    chunk = LIB.parse(data, 0, len(data), len(data), 1 << 20, True)
    assert RN._CHUNK_HEAD.unpack_from(chunk)[1] == 3
    qstate = array("q", [0, 0, 100, 0])
    for at, limit, why in [(0, 0, 1), (0, -5, 1), (1, len(data), 3), (len(data) + 9, len(data), 3)]:
        r = LIB.apply(data, chunk, 0, at, limit, array("q", [0]), {b"T" + bytes(4): 0}, [bytearray()], qstate,
                      None, None, None, None)
        assert r[2] == 0 and r[3] == 0 and r[8] == why, (at, limit, r)
        assert list(qstate) == [0, 0, 100, 0]
    buf = bytearray()                               # the same call with sane bounds applies all three
    r = LIB.apply(data, chunk, 0, 0, len(data), array("q", [-1]), {b"T" + bytes(4): 0}, [buf], qstate, None, None,
                  None, None)
    assert r[2] == 3 and r[8] == 0 and qstate[1] == 3 and len(buf) == 3 * F.CQ_STORE_UNIT_SIZE
    with pytest.raises(TypeError):
        LIB.apply(data, chunk, 0, 0, 10, array("q", [0]), [], [], qstate, None, None, None, None)
