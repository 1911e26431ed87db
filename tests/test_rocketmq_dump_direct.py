"""`dump commitlog --json` written straight to the output (nativedump.direct_rows, mqtool.io.write_in_order).

The reference is the Python path (MQTOOL_NATIVE=0, --jobs 1: records.Message.to_row rendered by
render.write_ndjson), which shares no code with the compiled JSON writer nor with the forked in-order writer.
Every comparison is of the whole CLI result: exit code, stdout bytes and stderr (damage notes), to a regular
file and to a pipe, with one process and with forked workers over ranges small enough that damaged units fall
in the middle of a worker's range and on range edges.
"""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from builders import rocketmq_unit
from conftest import FIXTURES, ROOT, require_realdata
from mqtool import ndjson, render
from mqtool.io import write_in_order
from mqtool.options import DumpOptions, ScanStats
from mqtool.rocketmq import nativedump, ops
from mqtool.rocketmq.records import FIXED

FIXTURE_STORE = FIXTURES / "rocketmq" / "store"
SEG = "00000000000000000000"


@pytest.fixture(autouse=True)
def _need_helper():
    if nativedump.helper() is None:
        if os.environ.get("CI", "").lower() == "true" and os.environ.get("MQTOOL_NATIVE") != "0":
            pytest.fail("compiled helper rmqdump not built")
        pytest.skip("compiled helper rmqdump not built (or MQTOOL_NATIVE=0)")


def _cli(store, *args, native: bool = True, to: str = "file", tmp: Path | None = None):
    """(exit code, stdout bytes, stderr bytes) of `mqtool dump commitlog STORE --json ARGS` in a subprocess."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), MQTOOL_NATIVE="1" if native else "0")
    argv = [sys.executable, "-m", "mqtool", "dump", "commitlog", str(store), "--json", *map(str, args)]
    if to == "file":
        out = tmp / "out.ndjson"
        with out.open("wb") as f:
            p = subprocess.run(argv, stdout=f, stderr=subprocess.PIPE, env=env, cwd=ROOT, timeout=300)
        return p.returncode, out.read_bytes(), p.stderr
    p = subprocess.run(argv, capture_output=True, env=env, cwd=ROOT, timeout=300)
    return p.returncode, p.stdout, p.stderr


def _assert_all_equal(store, tmp: Path, variants, pipe_too: bool = True):
    ref = _cli(store, "--jobs", "1", native=False, tmp=tmp)
    assert ref[1].count(b"\n") > 0
    for args in variants:
        assert _cli(store, *args, tmp=tmp) == ref, args
        if pipe_too:
            assert _cli(store, *args, to="pipe") == ref, args
    return ref


def _rocketmq_stores():
    root = require_realdata("rocketmq")
    stores = sorted(p.parent for p in root.glob("*/store/commitlog") if p.is_dir())
    assert stores
    return stores


# ---- hostile and damaged stores built here ------------------------------------------------------------------

HOSTILE_PROPS = [
    b"KEYS\x01a b\x02TAGS\x01t",
    b"KEYS\x01\"quoted\" back\\slash\x02TAGS\x01\x00\x01\x1f\x7f",       # quotes, backslashes, control characters
    b"KEYS\x01\xff\xfe bad\x02TAGS\x01ok",                                 # invalid UTF-8 (the Python path)
    b"KEYS\x01k\x02KEYS\x01again\x02TAGS\x01t",                            # a repeated name (property_pairs)
    b"KEYS\x01" + b"x\"\\\n" * 5000 + b"\x02TAGS\x01long",                 # a very long value, all escapes
    b"\x02".join(b"p%d\x01v%d" % (i, i) for i in range(80)),               # more pairs than the helper keeps
    b"KEYS\x01\xe2\x82\xac euro \xf0\x9f\x98\x80\x02UNIQ_KEY\x01\xed\xa0\x80",  # UTF-8 and a surrogate
    b"",
    b"\x01\x02=\x01\x02KEYS\x01\x02\x02",                                 # empty names and values
]


def _hostile_segment(n: int = 60, size: int = 1 << 16) -> bytearray:
    out = bytearray()
    for i in range(n):
        props = HOSTILE_PROPS[i % len(HOSTILE_PROPS)]
        topic = [b"T", b"T\"\\\x01", b"\xc3\xa9t\xc3\xa9", b"\xc0\xaf", b"x" * 127][i % 5]
        body = bytes((i * 7 + j) % 256 for j in range(i * 13 % 300))
        u = bytearray(rocketmq_unit(topic=topic, body=body, props=props, phys=len(out),
                                    version="v2" if i % 3 == 0 else "v1"))
        out += u
    return out + bytes(size - len(out)) if len(out) < size else out


def _unit_starts(seg: bytes) -> list[int]:
    starts, p = [], 0
    while p + 8 <= len(seg):
        size = int.from_bytes(seg[p:p + 4], "big")
        if size <= 0 or p + size > len(seg):
            break
        starts.append(p)
        p += size
    return starts


def _store(tmp: Path, segments: list[bytes]) -> Path:
    d = tmp / "store" / "commitlog"
    d.mkdir(parents=True)
    base = 0
    for data in segments:
        (d / f"{base:020d}").write_bytes(data)
        base += len(data)
    return tmp / "store"


def _damaged_hostile(tmp: Path) -> Path:
    seg = _hostile_segment()
    starts = _unit_starts(seg)
    assert len(starts) == 60
    for k in (5, 17, 40):                              # bodies whose CRC fails (crc_ok false rows)
        seg[starts[k] + FIXED.size + 1] ^= 0x55
    seg[starts[25] + 4:starts[25] + 8] = b"\xAB" * 4    # a magic code destroyed: damage, resync
    seg[starts[33]:starts[33] + 200] = bytes(200)       # a zeroed stretch inside the data
    second = bytearray(_hostile_segment())
    second[3000:3000] = bytes(range(97))                # bytes inserted: what follows is shifted
    return _store(tmp, [bytes(seg), bytes(second)])


def test_hostile_store_direct_equals_python(tmp_path):
    store = _damaged_hostile(tmp_path)
    # --split-size from 2K down to 256 bytes: damaged units fall inside ranges and on their edges
    ref = _assert_all_equal(store, tmp_path, [(), ("--jobs", "1"), ("--jobs", "2"), ("--jobs", "2", "--split-size",
                            "2K"), ("--jobs", "3", "--split-size", "512"), ("--jobs", "2", "--split-size", "256")])
    assert ref[0] == 1 and b"CRC does not match" in ref[2] and ref[2].count(b"\n") > 3
    # the hostile values are there, escaped
    assert b'\\"quoted\\"' in ref[1] and b"\\u0000\\u0001\\u001f" in ref[1] and b'"property_pairs"' in ref[1]


def test_fixture_and_every_real_store(tmp_path):
    for store in [FIXTURE_STORE] + _rocketmq_stores():
        _assert_all_equal(store, tmp_path, [(), ("--jobs", "2"), ("--jobs", "3", "--split-size", "4K")],
                          pipe_too=store == FIXTURE_STORE)


def test_real_store_damaged_across_ranges(tmp_path):
    src = require_realdata("rocketmq", "gen-4.9.7-clean", "store")
    store = tmp_path / "store"
    shutil.copytree(src, store)
    segs = sorted((store / "commitlog").iterdir())
    d = bytearray(segs[0].read_bytes())
    starts = _unit_starts(d)
    assert len(starts) > 40
    for k in (3, 11, 12, 30):
        d[starts[k] + 120] ^= 0x40                      # a flipped byte: a CRC, a length or a property
    d[starts[20]:starts[20] + 4] = b"\x7f\xff\xff\xff"  # a unit claiming a huge size
    segs[0].write_bytes(d)
    for split in ("1K", "3000", "64K"):
        _assert_all_equal(store, tmp_path, [("--jobs", "2", "--split-size", split)], pipe_too=split == "1K")


def test_options_that_leave_the_direct_path_unchanged(tmp_path):
    """--limit, offsets, filters and bodies keep their paths (and their output)."""
    for args in (("--limit", "7"), ("--from-offset", "5000", "--to-offset", "12000"), ("--topic", "Orders"),
                 ("--body", "base64", "--jobs", "2"), ("--include-blank", "--jobs", "2", "--split-size", "4K")):
        ref = _cli(FIXTURE_STORE, "--jobs", "1", *args, native=False, tmp=tmp_path)
        assert _cli(FIXTURE_STORE, *args, tmp=tmp_path) == ref, args


# ---- in process: the Direct row ------------------------------------------------------------------------------

def _python_rows(store, **kw):
    from mqtool import native

    stats = ScanStats()
    with native.switched(False):
        _c, rows, _t = ops.dump("commitlog", str(store), DumpOptions(ndjson=True, **kw), stats)
        buf = io.BytesIO()
        out = io.TextIOWrapper(buf, encoding="utf-8")
        rows = list(rows)
        render.write_ndjson(iter(rows), out)
        out.flush()
    return buf.getvalue(), rows, stats


def test_direct_row_in_process(tmp_path):
    """ops.dump gives one ndjson.Direct when the caller asks (write_direct); written to an in-memory stream
    (no file descriptor: this process writes), read back as dicts, its marked lines handed over in order."""
    store = _damaged_hostile(tmp_path)
    want, want_rows, want_stats = _python_rows(store)
    for jobs in (0, 1, 2):
        stats = ScanStats()
        _c, rows, _t = ops.dump("commitlog", str(store), DumpOptions(ndjson=True, write_direct=True, jobs=jobs),
                                stats)
        rows = list(rows)
        assert len(rows) == 1 and type(rows[0]) is ndjson.Direct
        marked = []
        rows[0].on_marked = marked.append
        buf = io.BytesIO()
        out = io.TextIOWrapper(buf, encoding="utf-8")
        n = render.write_ndjson(iter(rows), out)
        out.flush()
        assert buf.getvalue() == want and n == want.count(b"\n") == stats.messages == want_stats.messages
        assert stats.notes == want_stats.notes and stats.damaged == want_stats.damaged
        assert marked == [line for line in want.splitlines() if b'"crc_ok":false' in line] and len(marked) >= 2
    _c, rows, _t = ops.dump("commitlog", str(store), DumpOptions(ndjson=True, write_direct=True), ScanStats())
    assert list(render.as_dicts(rows)) == [r for r in render.as_dicts(want_rows)]
    _c, rows, _t = ops.dump("commitlog", str(store), DumpOptions(ndjson=True, write_direct=True), ScanStats())
    text = io.StringIO()                         # a text stream with no binary layer
    assert render.write_ndjson(rows, text) == want.count(b"\n")
    assert text.getvalue() == want.decode("utf-8", "surrogateescape")
    # without write_direct the rows stay what they were
    _c, rows, _t = ops.dump("commitlog", str(store), DumpOptions(ndjson=True, jobs=1), ScanStats())
    assert not any(type(r) is ndjson.Direct for r in rows)


def test_direct_parallel_to_a_file_descriptor(tmp_path, monkeypatch):
    """The forked writer in this process: to a file, with a hold of one byte (every range waits for its turn
    before it writes anything) and with the default hold; the same bytes and notes as the Python path."""
    import threading

    import mqtool.io

    store = _damaged_hostile(tmp_path)
    want, _rows, want_stats = _python_rows(store)
    calls = []
    real = mqtool.io.write_in_order
    monkeypatch.setattr(mqtool.io, "write_in_order", lambda fd, tasks, jobs, *a: calls.append(jobs) or
                        real(fd, tasks, jobs, *a))
    forks = threading.active_count() == 1       # (a test that left a thread running: one process, same bytes)
    for hold in (1, nativedump.HOLD_BYTES):
        monkeypatch.setattr(nativedump, "HOLD_BYTES", hold)
        stats = ScanStats()
        _c, rows, _t = ops.dump("commitlog", str(store), DumpOptions(ndjson=True, write_direct=True, jobs=3,
                                                                     split_size=700), stats)
        (item,) = rows
        path = tmp_path / f"out{hold}"
        with open(path, "wb") as f:
            n = item.write(f)
        assert path.read_bytes() == want and n == stats.messages == want_stats.messages
        assert stats.notes == want_stats.notes
    assert calls == ([3, 3] if forks else [])


# ---- the in-order writer itself ------------------------------------------------------------------------------

def _pieces(task, turn):
    i, n = task
    for k in range(n):
        turn.write(b"%d.%d\n" % (i, k))
    return (i, n, os.getpid())


def test_write_in_order_keeps_task_order(tmp_path):
    tasks = [(i, (i * 7) % 5) for i in range(40)]
    want = b"".join(b"%d.%d\n" % (i, k) for i, n in tasks for k in range(n))
    for jobs, hold in ((1, 1 << 20), (2, 1), (3, 4), (5, 1 << 20)):
        path = tmp_path / f"o{jobs}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            got = write_in_order(fd, tasks, jobs, _pieces, 1, hold)
        finally:
            os.close(fd)
        assert path.read_bytes() == want
        assert [g[:2] for g in got] == tasks
        assert len({g[2] for g in got}) == jobs              # really that many processes
    r, w = os.pipe()                                          # a pipe, read while it is written
    import threading

    chunks = []
    t = threading.Thread(target=lambda: chunks.extend(iter(lambda: os.read(r, 65536), b"")))
    t.start()
    try:
        write_in_order(w, tasks, 1, _pieces)                  # one process (threads: no fork)
    finally:
        os.close(w)
        t.join()
        os.close(r)
    assert b"".join(chunks) == want


def _fails_on_7(task, turn):
    i, _n = task
    if i == 7:
        raise ValueError("task 7 failed")
    turn.write(b"x")
    return i


def _children() -> set[int]:
    """This process's child processes (zombies included), from /proc: the writer must leave none of its own
    behind (others, e.g. a Spark JVM an earlier test started, may exist and are not its business)."""
    kids = set()
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as fh:
            kids.update(int(x) for x in fh.read().split())
    return kids


def test_write_in_order_child_error_and_closed_pipe(tmp_path):
    before = _children()
    fd = os.open(tmp_path / "o", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(ValueError, match="task 7 failed"):
            write_in_order(fd, [(i, 1) for i in range(20)], 3, _fails_on_7)
    finally:
        os.close(fd)
    r, w = os.pipe()
    os.close(r)                                               # nobody reads: EPIPE in the writers
    try:
        with pytest.raises(BrokenPipeError):
            write_in_order(w, [(i, 100) for i in range(20)], 2, _pieces)
    finally:
        os.close(w)
    assert _children() <= before                              # no child left behind, not even a zombie


def test_crc_failing_unit_left_to_the_dict_lane():
    """json_fill ends its run at a unit whose body CRC fails (and writes nothing of it), so the writer's damage
    notes come from the dict row; json_rows (the block lane) writes it."""
    mod = nativedump.helper()
    good = rocketmq_unit(body=b"hello", phys=0)
    bad = rocketmq_unit(body=b"hellO", phys=len(good), body_crc=zlib.crc32(b"hello") & 0x7FFFFFFF)
    buf = good + bad
    fj = nativedump.file_json("/x/" + SEG)
    out = bytearray(16)
    pos, n, end = mod.json_fill(buf, 0, len(buf), len(buf), 0, fj, 1 << 20, 0, 100, out, 0, 1 << 20)
    assert (pos, n) == (len(good), 1) and out[:end].count(b"\n") == 1 and b'"crc_ok":true' in out[:end]
    pos, n, end2 = mod.json_fill(buf, pos, len(buf), len(buf), 0, fj, 1 << 20, 0, 100, out, end, 1 << 20)
    assert (pos, n, end2) == (len(good), 0, end)
    _pos, n, data = mod.json_rows(buf, len(good), len(buf), len(buf), 0, fj, 1 << 20, 0, 100)
    assert n == 1 and b'"crc_ok":false' in data
    # a full buffer ends the run after one line: the caller writes between runs
    pos, n, _end = mod.json_fill(good * 3, 0, 3 * len(good), 3 * len(good), 0, fj, 1 << 20, 0, 100,
                                 bytearray(), 0, 1)
    assert n == 1


def test_text_escaped_at_every_position(tmp_path):
    """The JSON writer looks at text 16 bytes at a time: a byte to escape at each position of texts of 0 to 40
    bytes (topic, property names and values, keys), the last units ending right at the file's end (where it
    must not read past the text), equal to the Python path's lines."""
    seg = bytearray()
    for n in range(0, 41):
        for at in range(-1, n):
            text = bytearray(b"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH"[:n])
            if at >= 0:
                text[at] = b'"\\\x1f\x00\n'[at % 5]
            t = bytes(text) or b"t"
            props = b"KEYS\x01" + t + b" k2\x02" + t + b"\x01" + t + b"\x02TAGS\x01" + t
            seg += rocketmq_unit(topic=t[:127], props=props, body=t, phys=len(seg))
    store = _store(tmp_path, [bytes(seg)])                  # no zero fill: the last unit ends the file
    want, _rows, want_stats = _python_rows(store)
    _c, rows, _t = ops.dump("commitlog", str(store), DumpOptions(ndjson=True, write_direct=True, jobs=1),
                            ScanStats())
    buf = io.BytesIO()
    n = rows.__next__().write(buf)
    assert buf.getvalue() == want and n == want.count(b"\n") == want_stats.messages > 800


def _killed_on_5(task, turn):
    import signal

    if task[0] == 5:
        os.kill(os.getpid(), signal.SIGKILL)
    turn.write(b"x")
    return task[0]


def test_write_in_order_worker_killed(tmp_path):
    """A child that dies (the OOM killer, a signal) is one error, as for the process pool, and ends the call."""
    from mqtool.errors import MqToolError

    before = _children()
    fd = os.open(tmp_path / "o", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(MqToolError, match="worker process died"):
            write_in_order(fd, [(i, 1) for i in range(12)], 2, _killed_on_5)
    finally:
        os.close(fd)
    assert _children() <= before


def test_integers_at_their_edges(tmp_path):
    """Integers are written two digits (and eight) at a time: values at every power of ten and its neighbours,
    the int32/int64 extremes and negatives, in 4- and 8-byte fields, equal to the Python path's lines."""
    vals = sorted({s * v for k in range(19) for v in (10 ** k - 1, 10 ** k, 10 ** k + 1) for s in (1, -1)}
                  | {2 ** 63 - 1, -2 ** 63, 2 ** 31 - 1, -2 ** 31, 12345678901234567})
    seg = bytearray()
    for v in vals:
        q = max(-2 ** 31, min(2 ** 31 - 1, v))
        seg += rocketmq_unit(store_ts=v, born_ts=-v if v != -2 ** 63 else v, queue_offset=v, queue_id=q,
                             phys=len(seg))
    store = _store(tmp_path, [bytes(seg) + bytes(4096)])
    want, _rows, _st = _python_rows(store)
    _c, rows, _t = ops.dump("commitlog", str(store), DumpOptions(ndjson=True, write_direct=True, jobs=1),
                            ScanStats())
    buf = io.BytesIO()
    assert next(iter(rows)).write(buf) == len(vals)
    assert buf.getvalue() == want and b'"store_timestamp":-9223372036854775808,' in want
