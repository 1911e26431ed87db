"""verify on the real RocketMQ stores and on damaged copies of them (never the originals)."""
from __future__ import annotations

import json
import shutil
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import require_realdata
from formats import rocketmq as F
from mqtool.options import VerifyOptions
from mqtool.rocketmq.store import open_store
from mqtool.rocketmq.records import Message
from mqtool.rocketmq.scan import Damage, scan_store_segments
from mqtool.rocketmq.verify import verify_store

CLEAN = ["gen-4.9.7-clean", "gen-5.1.4-clean", "apache-rocketmq-fork-4e25b979"]
ALL_STORES = sorted(p.parent.name for p in require_realdata.__globals__["realdata_root"]().glob("rocketmq/*/store")) \
    if require_realdata.__globals__["realdata_root"]().exists() else ["gen-4.9.7-clean"]


def run_verify(path, part="store", **kw):
    findings, summary_fn = verify_store(open_store(path), part, VerifyOptions(**kw))
    found = list(findings)
    return found, summary_fn()


def codes(found, severity=None):
    return {f.code for f in found if severity is None or f.severity == severity}


@pytest.mark.parametrize("name", ALL_STORES)
def test_real_stores_have_no_error_finding(name):
    store = require_realdata("rocketmq", name, "store")
    found, s = run_verify(store)
    assert s.errors == 0, [f for f in found if f.severity == "error"]
    assert s.verdict in ("sound", "sound-with-warnings")


@pytest.mark.parametrize("name", ["gen-4.9.7-kill", "gen-5.1.4-kill"])
def test_kill_stores_report_only_what_a_crash_explains(name):
    store = require_realdata("rocketmq", name, "store")
    found, s = run_verify(store)
    # The crash explains: the abort file, index files newer than the checkpoint (a restarting broker would
    # delete them), messages written after the last checkpoint flush, and zero-filled preallocated space.
    assert codes(found, "warning") == {"unclean-shutdown", "index-after-checkpoint"}
    assert codes(found, "info") <= {"zero-fill", "checkpoint-behind"}
    assert s.errors == 0 and s.skipped_ranges == 0
    zero = [f for f in found if f.code == "zero-fill"]
    assert any(f.file.endswith("00000000000000327680") and f.position == 0 for f in zero)


def test_clean_store_verdict_and_message_count():
    store = require_realdata("rocketmq", "gen-5.1.4-clean", "store")
    exp = json.loads((store.parent / "expected.json").read_text())
    found, s = run_verify(store)
    assert s.messages == sum(len(e.get("items", [0])) for e in exp["messages"])
    assert s.verdict == "sound"


# ---- corruption suite ---------------------------------------------------------------------------------

def copy_store(tmp_path, name="gen-5.1.4-clean") -> Path:
    src = require_realdata("rocketmq", name, "store")
    dst = tmp_path / "store"
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def messages_of(store) -> dict[int, Message]:
    """physical offset (as stored) → message, for every readable message."""
    return {m.physical_offset: m for m in scan_store_segments(open_store(store).segments) if isinstance(m, Message)}


def salvaged(store, tmp_path, **kw):
    out = tmp_path / "salvage"
    found, s = run_verify(store, salvage_out=str(out), **kw)
    rows = [json.loads(x) for x in (out / "salvaged-messages.ndjson").read_text().splitlines()]
    return found, s, {r["physical_offset"] for r in rows}


def untouched(before: dict[int, Message], seg_name: str, lo: int, hi: int) -> set[int]:
    """Messages whose bytes do not intersect [lo, hi) of segment ``seg_name``."""
    return {off for off, m in before.items()
            if not (Path(m.file).name == seg_name and m.position < hi and m.position + m.size > lo)}


def pick(before, seg_index=2, nth=5):
    seg = sorted({Path(m.file).name for m in before.values()})[seg_index]
    ms = sorted((m for m in before.values() if Path(m.file).name == seg), key=lambda m: m.position)
    return seg, ms[nth]


def test_flipped_body_byte(tmp_path):
    store = copy_store(tmp_path)
    before = messages_of(store)
    seg, m = pick(before)
    p = store / "commitlog" / seg
    data = bytearray(p.read_bytes())
    data[m.body_start] ^= 0x40
    p.write_bytes(data)
    found, s, got = salvaged(store, tmp_path)
    crc = [f for f in found if f.code == "crc-mismatch"]
    assert len(crc) == 1 and crc[0].offset == m.offset and crc[0].file.endswith(seg)
    assert got == set(before)          # the damaged message is still read (framing intact)


def test_flipped_header_byte(tmp_path):
    store = copy_store(tmp_path)
    before = messages_of(store)
    seg, m = pick(before)
    p = store / "commitlog" / seg
    data = bytearray(p.read_bytes())
    data[m.position + 5] ^= 0xFF         # inside MAGICCODE
    p.write_bytes(data)
    found, s, got = salvaged(store, tmp_path)
    bad = [f for f in found if f.code == "bad-magic"]
    assert len(bad) == 1 and bad[0].offset == m.offset
    assert s.skipped_ranges == 1 and s.skipped_bytes == m.size
    assert got == untouched(before, seg, m.position + 5, m.position + 6)


def test_truncated_segment(tmp_path):
    store = copy_store(tmp_path)
    before = messages_of(store)
    seg, m = pick(before, seg_index=4)    # the last segment
    p = store / "commitlog" / seg
    cut = m.position + 30
    p.write_bytes(p.read_bytes()[:cut])
    found, s, got = salvaged(store, tmp_path)
    assert any(f.code == "segment-size" and f.file.endswith(seg) for f in found)
    tr = [f for f in found if f.code in ("truncated-record", "bad-size") and f.file.endswith(seg)]
    assert tr and tr[0].position == m.position
    assert got == {o for o in untouched(before, seg, cut, 1 << 40)}


def test_zeroed_page_in_the_middle(tmp_path):
    store = copy_store(tmp_path)
    before = messages_of(store)
    seg = sorted({Path(m.file).name for m in before.values()})[1]
    p = store / "commitlog" / seg
    data = bytearray(p.read_bytes())
    lo, hi = 8192, 8192 + 4096
    data[lo:hi] = bytes(4096)
    p.write_bytes(data)
    found, s, got = salvaged(store, tmp_path)
    errs = [f for f in found if f.severity == "error"]
    first_hit = min(m.position for m in before.values() if Path(m.file).name == seg and m.position + m.size > lo)
    assert errs and errs[0].file.endswith(seg) and errs[0].position == first_hit
    assert s.skipped_ranges == 1
    assert got == untouched(before, seg, lo, hi)


def test_garbage_inserted_between_records(tmp_path):
    store = copy_store(tmp_path)
    before = messages_of(store)
    seg, m = pick(before, seg_index=1, nth=10)
    p = store / "commitlog" / seg
    data = p.read_bytes()
    garbage = bytes((i * 37 + 11) % 256 for i in range(333))
    p.write_bytes(data[:m.position] + garbage + data[m.position:])
    found, s, got = salvaged(store, tmp_path)
    dmg = [f for f in found if f.severity == "error" and f.file.endswith(seg) and f.code != "segment-size"]
    assert dmg[0].position == m.position and s.skipped_bytes >= 333
    shifted = [f for f in found if f.code == "physical-offset-mismatch"]
    assert shifted and shifted[0].position == m.position + 333 and shifted[0].actual == m.offset
    assert any(f.code == "segment-size" for f in found)
    assert got == set(before)              # every message is still read, shifted or not


def test_missing_middle_segment(tmp_path):
    store = copy_store(tmp_path)
    before = messages_of(store)
    seg = sorted((store / "commitlog").iterdir())[2]
    seg.unlink()
    found, s, got = salvaged(store, tmp_path)
    miss = [f for f in found if f.code == "segment-missing"]
    assert len(miss) == 1 and miss[0].expected == int(seg.name)
    assert got == {o for o, m in before.items() if Path(m.file).name != seg.name}
    assert "a segment file is missing" in miss[0].message


def test_truncated_segment_says_no_file_is_missing(tmp_path):
    """A middle segment cut short: the gap after it is exactly what it lacks of the common size, so its
    ``segment-missing`` says that file is short (the names of the files on both sides are consecutive) and not
    that a file is missing; it follows from the ``segment-size`` of the short file (one root)."""
    from mqtool import causes

    store = copy_store(tmp_path)
    seg = sorted((store / "commitlog").iterdir())[1]
    full = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(full - 1000)
    findings, summary_fn = verify_store(open_store(str(store)), "store", VerifyOptions(progress=False))
    found = list(causes.linked(findings, summary_fn)[0])
    size = [f for f in found if f.code == "segment-size"]
    miss = [f for f in found if f.code == "segment-missing"]
    assert len(size) == 1 and len(miss) == 1 and miss[0].span == (int(seg.name) + full - 1000, int(seg.name) + full)
    assert "1000 bytes short of the segment size" in miss[0].message and "no file is missing" in miss[0].message
    assert miss[0].caused_by == size[0].id


@pytest.mark.parametrize("how", ["dangling", "loop", "dir", "fifo"])
def test_segment_that_is_no_file_is_unreadable_only(tmp_path, how, lane_impl):
    """A middle segment replaced by a dangling or looping link, a directory or a FIFO: that file gets exactly one
    finding, ``file-unreadable`` (nothing there is empty or of a wrong size), and no segment gap is invented
    around it; the messages of every other segment are read."""
    import os

    store = copy_store(tmp_path)
    before = messages_of(store)
    seg = sorted((store / "commitlog").iterdir())[2]
    seg.unlink()
    if how == "dangling":
        seg.symlink_to(seg.name + ".gone")
    elif how == "loop":
        seg.symlink_to(seg.name)
    elif how == "dir":
        seg.mkdir()
    else:
        os.mkfifo(seg)
    found, s, got = salvaged(store, tmp_path)
    assert sorted(f.code for f in found if f.file == str(seg)) == ["file-unreadable"]
    assert not codes(found) & {"segment-empty", "segment-size", "segment-missing", "segment-overlap"}
    assert got == {o for o, m in before.items() if Path(m.file).name != seg.name}


def test_stale_record_copied_elsewhere(tmp_path):
    store = copy_store(tmp_path)
    before = messages_of(store)
    seg, victim = pick(before, seg_index=1, nth=3)
    donor = min((m for m in before.values() if Path(m.file).name != seg and m.size <= victim.size),
                key=lambda m: m.offset)
    p = store / "commitlog" / seg
    data = bytearray(p.read_bytes())
    raw = Path(donor.file).read_bytes()[donor.position:donor.position + donor.size]
    data[victim.position:victim.position + len(raw)] = raw
    p.write_bytes(data)
    found, s, got = salvaged(store, tmp_path)
    stale = [f for f in found if f.code == "physical-offset-mismatch"]
    assert stale and stale[0].position == victim.position and stale[0].actual == donor.offset
    assert got >= untouched(before, seg, victim.position, victim.position + len(raw))


def test_consumequeue_unit_pointing_at_wrong_message(tmp_path):
    store = copy_store(tmp_path)
    f = store / "consumequeue" / "TopicA" / "1" / "00000000000000000000"
    data = bytearray(f.read_bytes())
    off, size, tags = struct.unpack_from(">qiq", data, 5 * 20)
    other_off, other_size, _ = struct.unpack_from(">qiq", (store / "consumequeue" / "TopicB" / "0" /
                                                         "00000000000000000000").read_bytes(), 0)
    struct.pack_into(">qiq", data, 5 * 20, other_off, other_size, tags)
    f.write_bytes(data)
    found, s = run_verify(store, part="consumequeue")
    wrong = [x for x in found if x.code == "cq-wrong-message"]
    assert len(wrong) == 1 and wrong[0].file == str(f) and wrong[0].position == 100
    assert wrong[0].expected == "TopicA/1" and wrong[0].actual == "TopicB/0"


def test_index_entry_with_wrong_hash(tmp_path):
    store = copy_store(tmp_path)
    idx = sorted((store / "index").iterdir())[0]
    data = bytearray(idx.read_bytes())
    pos = 40 + 100 * 4 + 7 * 20
    kh = struct.unpack_from(">i", data, pos)[0]
    struct.pack_into(">i", data, pos, kh ^ 0x1234)
    idx.write_bytes(data)
    found, s = run_verify(store, part="index")
    bad = [x for x in found if x.code == "index-hash-mismatch"]
    assert len(bad) == 1 and bad[0].position == pos and bad[0].actual == kh ^ 0x1234


def test_verify_cli_exit_codes(run_cli, tmp_path):
    store = require_realdata("rocketmq", "gen-4.9.7-clean", "store")
    code, out, err = run_cli("verify", "store", store, "--json")
    assert code == 0
    last = json.loads(out.splitlines()[-1])
    assert last["kind"] == "summary" and last["verdict"] == "sound" and last["errors"] == 0
    damaged = copy_store(tmp_path, "gen-4.9.7-clean")
    seg = sorted((damaged / "commitlog").iterdir())[1]
    data = bytearray(seg.read_bytes())
    data[1000:1100] = b"\xAB" * 100
    seg.write_bytes(data)
    code, out, err = run_cli("verify", "store", damaged, "--json")
    assert code == 1
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows[-1]["errors"] >= 1 and rows[-1]["skipped_ranges"] >= 1
    (tmp_path / "empty").mkdir()
    code, out, err = run_cli("verify", "store", tmp_path / "empty")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


# ---- a queue-offset gap and the damage that explains it, whatever lies between -------------------------

def _gap_store(root: Path):
    """Units of queues A/0 and B/0 interleaved (hand-laid, see the list), two of them made unreadable by a
    broken MAGICCODE; returns (store, {name: (offset, size)})."""
    from builders import rocketmq_unit

    plan = [("a0", b"A", 0), ("b0", b"B", 0), ("a1", b"A", 1), ("b1", b"B", 1), ("b2", b"B", 2), ("a2", b"A", 2),
            ("a3", b"A", 3), ("b3", b"B", 3), ("a5", b"A", 5), ("b4", b"B", 4), ("a6", b"A", 6), ("b5", b"B", 5)]
    data, at = bytearray(), {}
    for name, topic, qoff in plan:
        u = rocketmq_unit(topic, bytes([65 + len(at)]) * 1500, phys=len(data), queue_offset=qoff)
        at[name] = (len(data), len(u))
        data += u
    for name in ("a1", "b4"):               # MAGICCODE (bytes 4..8 of a unit) broken: the unit cannot be read
        data[at[name][0] + 4:at[name][0] + 8] = b"\xde\xad\xbe\xef"
    seg = root / "commitlog" / f"{0:020d}"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(bytes(data) + bytes(65536 - len(data)))
    return root, at


@pytest.mark.parametrize("mode", ["native", "python-lane", "no-lane", "ranges", "ranges-python"])
def test_queue_gap_follows_the_damage_between_the_queues_messages(tmp_path, monkeypatch, mode):
    """A gap is caused by the damaged unit that lies between the queue's previous message and the one that
    shows the gap, whether or not another queue's messages lie in between (A: a0, damaged a1, b1, b2, a2); a
    gap with no damage after the queue's previous message is a root of its own (a5 after a3: the damage at
    a1 lies before a3); of two damaged units the one after the previous message is the cause (b5: b4, not a1)."""
    from mqtool import causes, native
    from mqtool.rocketmq.verify import native_lane

    store, at = _gap_store(tmp_path / "store")
    monkeypatch.setattr(native_lane, "USE_FAST_LANE", mode != "no-lane")
    kw = dict(jobs=2, split_size=4096) if mode.startswith("ranges") else {}
    with native.switched(mode in ("native", "ranges")):
        found = causes.link(run_verify(store, part="commitlog", **kw)[0])
    roots = {f.offset: f for f in found if f.severity == "error" and f.caused_by is None}
    assert sorted(roots) == [at["a1"][0], at["b4"][0]]
    gaps = {f.offset: f for f in found if f.code == "queue-offset-gap"}
    assert sorted(gaps) == [at["a2"][0], at["a5"][0], at["b5"][0]]
    assert (gaps[at["a2"][0]].expected, gaps[at["a2"][0]].actual) == (1, 2)
    assert gaps[at["a2"][0]].caused_by == roots[at["a1"][0]].id
    assert gaps[at["a5"][0]].caused_by is None
    assert gaps[at["b5"][0]].caused_by == roots[at["b4"][0]].id


# ---- hypothesis: random bytes and mutations never crash, never over-allocate -----------------------

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=0, max_size=4096))
def test_random_segment_never_crashes(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("rnd") / "commitlog"
    d.mkdir()
    (d / "00000000000000000000").write_bytes(data)
    found, s = run_verify(d, part="commitlog")
    assert s.skipped_bytes <= len(data)


_SEGMENT_CACHE = {}


def _real_segment():
    if "seg" not in _SEGMENT_CACHE:
        p = require_realdata("rocketmq", "gen-5.1.4-clean", "store", "commitlog", "00000000000000065536")
        _SEGMENT_CACHE["seg"] = p.read_bytes()
    return _SEGMENT_CACHE["seg"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(muts=st.lists(st.tuples(st.integers(0, 65535), st.integers(0, 255)), min_size=1, max_size=30),
       cut=st.integers(0, 65536))
def test_mutated_real_segment_never_crashes(tmp_path_factory, muts, cut):
    data = bytearray(_real_segment())
    for pos, val in muts:
        data[pos] = val
    data = bytes(data[:cut])
    d = tmp_path_factory.mktemp("mut") / "commitlog"
    d.mkdir()
    (d / "00000000000000065536").write_bytes(data)
    found, s = run_verify(d, part="commitlog")
    assert s.skipped_bytes <= len(data)
    events = list(scan_store_segments(open_store(d).segments))
    covered = sum(e.size for e in events if isinstance(e, Message)) + \
        sum(e.length for e in events if isinstance(e, Damage))
    assert covered <= len(data)


# ---- a unit whose bytes are not what the broker wrote is damage, whatever check shows it ------------------

def _prop_crc_tail(unit: bytes, wrong: bool) -> bytes:
    """``unit`` (its properties ending in ``__CRC32#\\x01`` + 10 placeholder digits + ``\\x02``) with the
    whole-message CRC written as reference/rocketmq.md §1.7 gives it: crc32 of the unit up to the 20-byte tail,
    & 0x7FFFFFFF, least-significant digit first, padded with '0' to 10 digits (``wrong``: the CRC plus one)."""
    crc = (zlib.crc32(unit[:-20]) & 0x7FFFFFFF) + wrong
    return unit[:-11] + str(crc)[::-1].ljust(10, "0").encode() + b"\x02"


def _unit_damage_store(root: Path):
    """Six units in one segment (PHYSICALOFFSET right, body CRC right in each): clean; a whole-message CRC that
    fails; clean; a zlib-flagged body that is no zlib stream; a whole-message CRC that holds; a zlib body that
    inflates. Returns (store, {name: (offset, size)})."""
    from builders import rocketmq_segment_store, rocketmq_unit

    tail = b"KEYS\x01k\x02" + F.PROPERTY_CRC32.encode() + b"\x01" + b"0" * 10 + b"\x02"
    plan = [("clean0", {}), ("prop-crc-bad", {"props": tail}), ("clean2", {}),
            ("no-inflate", {"sysflag": F.COMPRESSED_FLAG, "body": b"this is no zlib stream"}),
            ("prop-crc-good", {"props": tail}),
            ("inflates", {"sysflag": F.COMPRESSED_FLAG, "body": zlib.compress(b"hello")})]

    def make(i, phys):
        name, kw = plan[i]
        u = rocketmq_unit(b"T", **{"body": b"body %d" % i, **kw}, phys=phys, queue_offset=i)
        return _prop_crc_tail(u, wrong=name == "prop-crc-bad") if name.startswith("prop-crc") else u

    at = rocketmq_segment_store(root, len(plan), make)
    return root, {name: a for (name, _), a in zip(plan, at)}


@pytest.mark.parametrize("mode", ["native", "no-lane", "ranges"])
def test_prop_crc_and_inflate_failures_are_damaged_units_in_verify_info_and_report(tmp_path, monkeypatch, mode):
    """``prop-crc-mismatch`` and ``body-inflate-failed`` name the whole unit as their span (they carried none,
    so ``info`` and the damaged ranges/bytes of verify's summary counted them nowhere); info, verify and report
    count the same two damaged units, and a whole-message CRC that holds or a body that inflates is no finding."""
    from mqtool import causes, native
    from mqtool.info import build_info
    from mqtool.options import InfoOptions
    from mqtool.report import build_report
    from mqtool.rocketmq.verify import native_lane

    store, at = _unit_damage_store(tmp_path / "store")
    want = {"prop-crc-mismatch": at["prop-crc-bad"], "body-inflate-failed": at["no-inflate"]}
    monkeypatch.setattr(native_lane, "USE_FAST_LANE", mode != "no-lane")
    kw = dict(jobs=2, split_size=4096) if mode == "ranges" else {}
    with native.switched(mode != "no-lane"):
        findings, summary_fn = verify_store(open_store(store), "commitlog", VerifyOptions(progress=False, **kw))
        gen, summary = causes.linked(findings, summary_fn)
        found = [f for f in gen if f.severity == "error"]
        s = summary()
        info = build_info(store, None, InfoOptions(progress=False))
        _, _, rs, _ = build_report(store, None, InfoOptions(progress=False), VerifyOptions(progress=False, **kw))
    assert len(found) == 2
    assert {f.code: (f.offset, f.span) for f in found} == {c: (o, (o, o + n)) for c, (o, n) in want.items()}
    damaged = (2, sum(n for _, n in want.values()))
    assert (s.damaged_ranges, s.damaged_bytes) == damaged
    assert (rs.damaged_ranges, rs.damaged_bytes) == damaged
    assert (info.damage_total, info.damaged_bytes) == damaged
    assert sorted((d.offset, d.length, d.code) for d in info.damage) == sorted(
        (o, n, c) for c, (o, n) in want.items())
