"""Hostile and odd input: each case gives findings or a one-line error with the right exit code, never a
traceback, a hang or an allocation the input asked for.

Hang guard: every CLI run here is under ``alarm`` (SIGALRM raises, the test fails); it is a guard against
blocking reads and unbounded loops, not a timing assertion.
"""
from __future__ import annotations

import json
import base64
import os
import shutil
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, alarm, require_realdata
from formats import rocketmq as F
from mqtool import codecs
from mqtool.options import VerifyOptions
from mqtool.rocketmq.store import open_store
from mqtool.rocketmq.verify import verify_store
from builders import rocketmq_unit as unit, rocketmq_units as units

SEG0 = "00000000000000000000"


@pytest.fixture
def cli(run_cli):
    def _run(*args, timeout: int = 60):
        with alarm(timeout):
            return run_cli(*args)

    return _run


def one_line_error(code, err, expected_code=2):
    assert code == expected_code, err
    assert "Traceback" not in err
    assert err.startswith("mqtool: ") and err.count("\n") == 1, err


def rows(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def verify(path, part="store"):
    findings, summary_fn = verify_store(open_store(path), part, VerifyOptions(progress=False))
    with alarm(60):
        found = list(findings)
    return found, summary_fn()


def fixture_copy(tmp_path) -> Path:
    dst = tmp_path / "store"
    shutil.copytree(FIXTURES / "rocketmq" / "store", dst)
    return dst


def make_commitlog(tmp_path, data: bytes, name: str = SEG0) -> Path:
    d = tmp_path / "store" / "commitlog"
    d.mkdir(parents=True)
    (d / name).write_bytes(data)
    return d.parent


# ---- lengths: a record claiming 2 GiB --------------------------------------------------------------------

def test_record_claiming_2gib_costs_nothing(tmp_path):
    good = units(3, start=0)
    bad = bytearray(unit(phys=len(good)))
    struct.pack_into(">i", bad, 0, 0x7FFFFFFF)                 # TOTALSIZE = 2 GiB - 1
    tail = b"".join(unit(body=f"after {i}".encode(), phys=0) for i in range(2))
    data = good + bytes(bad) + tail
    store = make_commitlog(tmp_path, data)
    tracemalloc.start()
    try:
        found, s = verify(store, "commitlog")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"peak {peak} bytes for a {len(data)}-byte segment"
    errs = [f for f in found if f.severity == "error"]
    assert errs[0].code == "truncated-record" and errs[0].position == len(good) and errs[0].actual == 0x7FFFFFFF
    assert s.messages == 5          # the 3 before and the 2 after (body CRC valid, so resync accepts them)


def test_body_length_claiming_2gib(tmp_path):
    m = bytearray(unit(body=b"x" * 10))
    struct.pack_into(">i", m, 84, 0x7FFFFFF0)                  # BODYLENGTH (fixed part ends at 88)
    store = make_commitlog(tmp_path, bytes(m) + units(1, start=len(m)))
    found, s = verify(store, "commitlog")
    assert [f.code for f in found if f.severity == "error"] == ["bad-length-field"]
    assert s.messages == 1


# ---- index chains: cycles, self-pointing prev links ------------------------------------------------------

def _index_file(store: Path) -> Path:
    return sorted((store / "index").iterdir())[0]


def _entry_pos(data: bytes, k: int) -> tuple[int, int]:
    slots = 40          # maxHashSlotNum of the fixture store (SLOTS in fixtures/build_rocketmq.py)
    assert len(data) == F.index_file_size(slots, 160)
    return slots, F.INDEX_HEADER_SIZE + slots * 4 + k * F.INDEX_ENTRY_SIZE


def test_index_self_pointing_prev_link(tmp_path, cli):
    store = fixture_copy(tmp_path)
    idx = _index_file(store)
    data = bytearray(idx.read_bytes())
    slots, pos = _entry_pos(data, 3)
    struct.pack_into(">i", data, pos + 16, 3)                    # entry 3: prev = 3
    idx.write_bytes(data)
    found, _ = verify(store, "index")
    bad = [f for f in found if f.code == "index-bad-link"]
    assert len(bad) == 1 and bad[0].position == pos and bad[0].actual == 3
    code, out, err = cli("dump", "index", idx, "--json")
    assert code == 0 and "Traceback" not in err


def test_index_chain_cycle(tmp_path, cli):
    store = fixture_copy(tmp_path)
    idx = _index_file(store)
    data = bytearray(idx.read_bytes())
    slots, _ = _entry_pos(data, 1)
    # make every entry point at the newest one: a cycle through entry n from whichever slot reaches it
    n = struct.unpack_from(">i", data, 36)[0] - 1
    for k in range(1, n + 1):
        _, pos = _entry_pos(data, k)
        struct.pack_into(">i", data, pos + 16, n if k != n else n - 1)
    idx.write_bytes(data)
    found, _ = verify(store, "index")
    assert any(f.code == "index-chain-cycle" for f in found)
    assert sum(1 for f in found if f.code == "index-bad-link") == n - 1     # every entry but n points forward
    code, out, err = cli("query", store, "--key", "order-1", "--json", timeout=60)
    assert code in (0, 1) and "Traceback" not in err


# ---- compressed bombs ------------------------------------------------------------------------------------

_BOMB = 80 << 20          # inflates past the 64 MiB cap of mqtool.codecs


@pytest.fixture(scope="module")
def bombs():
    zeros = bytes(_BOMB)
    out = {c: codecs.compress(c, zeros, level=9 if c == "zlib" else 3) for c in ("zlib", "zstd", "lz4")}
    del zeros
    return out


@pytest.mark.parametrize("codec,bits", [("zlib", 0x301), ("zstd", 0x201), ("lz4", 0x101)])
def test_compressed_bomb_is_capped(tmp_path, cli, bombs, codec, bits):
    body = bombs[codec]
    data = unit(body=body, sysflag=bits) + units(1, start=F.calc_msg_length("v1", bits, len(body), 1, 17))
    store = make_commitlog(tmp_path, data)
    tracemalloc.start()
    try:
        code, out, err = cli("dump", "commitlog", store, "--body", "base64", "--json")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 1 and "exceeds" in err, err        # issue #15: a body_error row makes dump exit 1
    r = rows(out)
    assert r[0]["compression"] == codec and r[0]["body"] is None
    assert "exceeds" in r[0]["body_error"]
    assert r[1]["body"] is not None
    assert peak < 3 * (64 << 20)        # bounded by the cap, not by what the bomb inflates to


# ---- unreadable files, permission errors ------------------------------------------------------------------

def _unprivileged_cmd() -> list[str] | None:
    """Run as someone file modes apply to: root without the DAC capabilities, or ourselves when not root."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv"):
        probe = subprocess.run(["setpriv", "--bounding-set=-dac_override,-dac_read_search", "true"],
                               capture_output=True)
        if probe.returncode == 0:
            return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    return None


def _run_unprivileged(*args) -> tuple[int, str, str]:
    pre = _unprivileged_cmd()
    if pre is None:
        pytest.skip("running as root without a way to drop DAC capabilities: modes are not enforced")
    r = subprocess.run(pre + [sys.executable, "-m", "mqtool", *map(str, args)], capture_output=True, text=True,
                       timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return r.returncode, r.stdout, r.stderr


def test_unreadable_segment_and_files(tmp_path):
    store = fixture_copy(tmp_path)
    seg = sorted((store / "commitlog").iterdir())[1]
    locked = [seg, _index_file(store), store / "checkpoint"]
    for p in locked:
        p.chmod(0)
    (store / "consumequeue" / "Payments").chmod(0)
    try:
        code, out, err = _run_unprivileged("dump", "commitlog", store, "--json")
        assert code == 1 and "Traceback" not in err
        assert "file-unreadable" in err and seg.name in err and "permission denied" in err
        got = rows(out)
        assert got and all(not r["file"].endswith(seg.name) for r in got)
        code, out, err = _run_unprivileged("verify", "store", store, "--json")
        assert code == 1 and "Traceback" not in err, err
        found = {(r["code"], Path(r["file"]).name) for r in rows(out) if r["kind"] == "finding"}
        for p in locked:
            assert ("file-unreadable", p.name) in found, found
        assert ("dir-unreadable", "Payments") in found
        code, out, err = _run_unprivileged("dump", "checkpoint", store)
        one_line_error(code, err)
        assert "permission denied" in err
        code, out, err = _run_unprivileged("dump", "consumequeue", store, "--json")
        assert code == 1 and "Payments: cannot list directory" in err and rows(out)
        code, out, err = _run_unprivileged("dump", "index", store, "--json")
        assert code == 1 and "permission denied; skipped" in err
    finally:
        (store / "consumequeue" / "Payments").chmod(0o755)
        for p in locked:
            p.chmod(0o644)


# ---- symlink loops, FIFOs, devices ------------------------------------------------------------------------

def test_symlink_loops_inside_a_store(tmp_path, cli):
    store = fixture_copy(tmp_path)
    segs = sorted((store / "commitlog").iterdir())
    loop = store / "commitlog" / f"{int(segs[-1].name) + 4096:020d}"
    loop.symlink_to(loop.name)                                   # points at itself: ELOOP
    (store / "consumequeue" / "Loop").symlink_to(".")            # a directory cycle
    (store / "consumequeue" / "Orders" / "7").symlink_to("../..")
    code, out, err = cli("dump", "commitlog", store, "--json")
    assert code == 1 and "file-unreadable" in err and "Traceback" not in err
    assert len(rows(out)) > 0
    code, out, err = cli("dump", "consumequeue", store, "--json")
    assert code == 0 and "Traceback" not in err
    code, out, err = cli("verify", "store", store, "--json")
    assert code == 1
    assert any(r.get("code") == "file-unreadable" and r["file"] == str(loop) for r in rows(out))


def test_fifo_named_like_a_segment_never_blocks(tmp_path, cli):
    store = fixture_copy(tmp_path)
    segs = sorted((store / "commitlog").iterdir())
    fifo = store / "commitlog" / f"{int(segs[-1].name) + 4096:020d}"
    os.mkfifo(fifo)
    expected = len(rows(cli("dump", "commitlog", FIXTURES / "rocketmq" / "store", "--json")[1]))
    code, out, err = cli("dump", "commitlog", store, "--json", timeout=30)
    assert code == 1 and "FIFO" in err and "Traceback" not in err
    assert len(rows(out)) == expected
    code, out, err = cli("verify", "store", store, "--json", timeout=30)
    assert code == 1 and any(r.get("code") == "file-unreadable" for r in rows(out))
    code, out, err = cli("dump", "commitlog", fifo, "--format", "rocketmq", timeout=30)
    one_line_error(code, err)


def test_only_a_fifo_in_the_commitlog(tmp_path, cli):
    d = tmp_path / "s" / "commitlog"
    d.mkdir(parents=True)
    os.mkfifo(d / SEG0)
    code, out, err = cli("dump", "commitlog", d.parent, timeout=30)
    one_line_error(code, err)                           # not recognised as a store: nothing readable
    code, out, err = cli("dump", "commitlog", d.parent, "--format", "rocketmq", "--json", timeout=30)
    assert code == 1 and "FIFO" in err and out == ""


def test_device_file_named_like_a_segment(tmp_path, cli):
    store = fixture_copy(tmp_path)
    segs = sorted((store / "commitlog").iterdir())
    dev = store / "commitlog" / f"{int(segs[-1].name) + 4096:020d}"
    dev.symlink_to("/dev/zero")                                  # a character device, endless zeros
    code, out, err = cli("dump", "commitlog", store, "--json", timeout=30)
    assert code == 1 and "device" in err and "Traceback" not in err
    code, out, err = cli("verify", "store", store, "--json", timeout=30)
    assert code == 1


@pytest.mark.parametrize("args", [("dump", "commitlog", "/dev"), ("verify", "store", "/dev"),
                                  ("dump", "commitlog", "/dev", "--format", "rocketmq"),
                                  ("verify", "store", "/dev", "--format", "rocketmq"),
                                  ("dump", "commitlog", "/dev/zero", "--format", "rocketmq"),
                                  ("dump", "index", "/dev/null", "--format", "rocketmq")])
def test_dev(cli, args):
    code, out, err = cli(*args, timeout=30)
    one_line_error(code, err)


# ---- names and sizes -------------------------------------------------------------------------------------

def test_non_utf8_file_and_topic_names(tmp_path, cli):
    store = fixture_copy(tmp_path)
    raw = b"T\xff\xfeopic"
    name = os.fsdecode(raw)
    shutil.copytree(store / "consumequeue" / "Payments", store / "consumequeue" / name)
    seg = sorted((store / "commitlog").iterdir())[-1]
    # a message whose topic bytes are not UTF-8, appended where the zero fill of the last segment starts
    data = bytearray(seg.read_bytes())
    end = len(data.rstrip(b"\x00"))
    m = unit(topic=raw, phys=int(seg.name) + end)
    data[end:end + len(m)] = m
    seg.write_bytes(bytes(data[:4096]))
    code, out, err = cli("dump", "consumequeue", store, "--json")
    assert code == 0, err
    files = {os.fsencode(r["file"]) for r in rows(out)}          # valid JSON; exact names come back
    assert any(raw in f for f in files)
    code, out, err = cli("dump", "commitlog", store, "--json")
    assert code == 0
    last = rows(out)[-1]
    assert base64.b64decode(last["topic"]) == raw and last["topic_encoding"] == "base64"     # exact bytes back
    found, _ = verify(store)
    assert any(f.code == "not-utf8" and f.offset == int(seg.name) + end for f in found)
    code, out, err = cli("verify", "store", store, "--json")
    rows(out)                                                     # every line parses
    assert "Traceback" not in err


def test_empty_files(tmp_path, cli):
    s = tmp_path / "store"
    for d in ("commitlog", "index", "consumequeue/T/0", "config"):
        (s / d).mkdir(parents=True)
    for f in (f"commitlog/{SEG0}", "index/20261122090857074", "checkpoint", f"consumequeue/T/0/{SEG0}",
              "config/topics.json", "abort"):
        (s / f).write_bytes(b"")
    for part in ("commitlog", "consumequeue", "index", "checkpoint", "config", "abort"):
        code, out, err = cli("dump", part, s, "--format", "rocketmq", "--json")
        assert code == 0 and "Traceback" not in err, (part, err)
    found, summary = verify(s)
    codes = {f.code for f in found}
    assert {"segment-empty", "index-truncated", "checkpoint-size", "config-unparsable"} <= codes
    code, out, err = cli("verify", "store", s, "--format", "rocketmq")
    assert code == 1 and "Traceback" not in err


_SHRINK_SCRIPT = r"""
import os, sys
from mqtool import io
from mqtool.rocketmq.store import open_store
from mqtool.rocketmq.scan import SegmentScanner
io.READ_WHOLE_LIMIT = int(sys.argv[2])
seg = open_store(sys.argv[1]).segments[0]
out = []
for i, ev in enumerate(SegmentScanner(seg).events()):
    out.append(f"{type(ev).__name__}:{getattr(ev, 'code', getattr(ev, 'reason', ''))}")
    if i == 0:
        os.truncate(seg.path, 300)
print(" ".join(out))
"""


@pytest.mark.parametrize("whole_limit", [0, 1 << 30], ids=["mapped", "read-whole"])
def test_file_that_shrinks_while_being_read(tmp_path, whole_limit):
    data = units(40)
    store = make_commitlog(tmp_path, data + bytes(8192))
    # a separate process: if a mapped read ever touched a lost page, SIGBUS would kill it, not pytest
    r = subprocess.run([sys.executable, "-c", _SHRINK_SCRIPT, str(store), str(whole_limit)], capture_output=True,
                       text=True, timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, (r.returncode, r.stderr)
    evs = r.stdout.split()
    assert "Damage:file-changed" in evs
    if whole_limit == 0:
        assert evs[:2] == ["Message:", "Damage:file-changed"]      # stopped at once
    else:
        assert evs.count("Message:") == 40                        # the snapshot read before the change


def test_sparse_2gib_file_of_zeros(tmp_path, cli):
    store = fixture_copy(tmp_path)
    segs = sorted((store / "commitlog").iterdir())
    big = store / "commitlog" / f"{int(segs[-1].name) + 4096:020d}"
    with open(big, "wb") as f:
        f.truncate(2 << 30)
    with open(store / "index" / "20991231235959999", "wb") as f:
        f.truncate(2 << 30)
    with open(store / "consumequeue" / "Orders" / "0" / "00000000000000000400", "wb") as f:
        f.truncate(2 << 30)
    for args in (("dump", "commitlog", store), ("dump", "consumequeue", store), ("dump", "index", store),
                 ("verify", "store", store)):
        code, out, err = cli(*args, "--json", timeout=60)
        assert code in (0, 1) and "Traceback" not in err
    found, s = verify(store)
    assert any(f.code == "zero-fill" and f.file == str(big) and f.position == 0 for f in found)
    assert any(f.code == "index-geometry" for f in found)
    alone = tmp_path / "alone" / "commitlog"
    alone.mkdir(parents=True)
    with open(alone / SEG0, "wb") as f:
        f.truncate(2 << 30)
    code, out, err = cli("dump", "commitlog", alone.parent, timeout=60)
    one_line_error(code, err)                                    # not a store: no magic anywhere
    code, out, err = cli("verify", "store", alone.parent, "--format", "rocketmq", "--json", timeout=60)
    assert code == 0 and rows(out)[-1]["messages"] == 0


def test_directory_that_is_not_a_store(tmp_path, cli):
    d = tmp_path / "photos"
    d.mkdir()
    (d / "cat.jpg").write_bytes(b"\xff\xd8\xff" + bytes(100))
    (d / "sub").mkdir()
    for args in (("dump", "commitlog", d), ("verify", "store", d), ("dump", "index", d),
                 ("dump", "commitlog", d, "--format", "rocketmq"), ("verify", "store", d, "--format", "rocketmq"),
                 ("dump", "commitlog", d / "cat.jpg"), ("dump", "commitlog", tmp_path / "missing")):
        code, out, err = cli(*args)
        one_line_error(code, err)


def test_damaged_real_store_copy_answers(tmp_path, cli):
    src = require_realdata("rocketmq", "gen-4.9.7-clean", "store")
    store = tmp_path / "store"
    shutil.copytree(src, store)
    for p in store.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    seg = sorted((store / "commitlog").iterdir())[2]
    data = bytearray(seg.read_bytes())
    data[5000:9000] = os.urandom(4000)
    seg.write_bytes(data)
    code, out, err = cli("verify", "store", store, "--json")
    assert code == 1 and rows(out)[-1]["verdict"] == "damaged"
    code, out, err = cli("dump", "commitlog", store, "--json")
    assert code == 1 and "skipped" in err
