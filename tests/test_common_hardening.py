"""Named regression tests for the LiteMQ and Kafka engine changes the corruption matrix drove.

Expected values come from Kafka's ``expected.json`` and LiteMQ's ``expected.json`` (positions, offsets,
sizes) and hand-made damage; never from mqtool's own output.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from conftest import load_json, require_realdata


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def _verify(run_cli, path, *args, salvage=None):
    extra = ("--salvage-out", str(salvage)) if salvage else ()
    code, out, err = run_cli("verify", "store", path, "--json", *args, *extra)
    rows = [json.loads(x) for x in out.splitlines()]
    return code, [r for r in rows if r["kind"] == "finding"], rows[-1]


# ---- LiteMQ --------------------------------------------------------------------------------------

def _litemq(tmp_path, name="clean"):
    src = require_realdata("litemq", name, "data", "broker")
    exp = load_json(src.parent.parent / "expected.json")
    acc = sorted((m for m in exp["messages"] if m["accepted"]), key=lambda m: m["commitlog_offset"])
    return _copy(src, tmp_path / "broker"), acc


def _salvaged_ids(p: Path) -> set:
    return {json.loads(x)["msg_id"] for x in p.read_text().splitlines()}


def test_litemq_zeroed_bytes_before_newer_records_are_damage(run_cli, tmp_path):
    """A zero length followed by newer records is not the end of data: zeroed-range at the first zeroed record,
    every record after it carved and salvaged."""
    store, acc = _litemq(tmp_path)
    in0 = [m for m in acc if m["commitlog_file"].endswith("0000")]
    victim = in0[3]
    seg = store / victim["commitlog_file"]
    data = bytearray(seg.read_bytes())
    p = victim["offset_in_file"]
    data[p:p + victim["store_size_incl_prefix"]] = bytes(victim["store_size_incl_prefix"])
    seg.write_bytes(data)
    code, fs, s = _verify(run_cli, store, salvage=tmp_path / "s.ndjson")
    hit = [f for f in fs if f["code"] == "zeroed-range"]
    assert code == 1 and [(f["severity"], f["file"], f["position"]) for f in hit] == \
        [("error", victim["commitlog_file"], p)]
    assert _salvaged_ids(tmp_path / "s.ndjson") == {m["message_id"] for m in acc} - {victim["message_id"]}


def test_litemq_zeroed_file_tail_before_a_newer_file_is_damage(run_cli, tmp_path):
    """Zeros from a record to the end of file 0 while file 1 holds newer records: damage (LiteMQ only opens a
    new file when the previous one is exactly full)."""
    store, acc = _litemq(tmp_path)
    last0 = [m for m in acc if m["commitlog_file"].endswith("0000")][-1]
    seg = store / last0["commitlog_file"]
    data = bytearray(seg.read_bytes())
    p = last0["offset_in_file"]
    data[p:] = bytes(len(data) - p)
    seg.write_bytes(data)
    code, fs, s = _verify(run_cli, store)
    hit = [f for f in fs if f["file"] == last0["commitlog_file"] and f["position"] == p]
    assert code == 1 and [f["code"] for f in hit] == ["zeroed-range"] and "later file" in hit[0]["message"]


def test_litemq_overlong_length_prefix_hides_no_record(run_cli, tmp_path):
    """A length prefix made 16 KiB longer used to swallow the records it covered; now the live data ends at
    that record (length-mismatch) and the carve recovers every record after it."""
    store, acc = _litemq(tmp_path, "crash")
    victim = acc[5]
    seg = store / victim["commitlog_file"]
    data = bytearray(seg.read_bytes())
    p = victim["offset_in_file"]
    (n,) = struct.unpack_from(">I", data, p)
    struct.pack_into(">I", data, p, n + 0x4000)
    seg.write_bytes(data)
    code, fs, s = _verify(run_cli, store, salvage=tmp_path / "s.ndjson")
    bad = [(f["code"], f["position"]) for f in fs if f["severity"] == "error" and f["file"] == victim["commitlog_file"]
           and f["code"] in ("length-mismatch", "bad-length")]
    assert bad == [("length-mismatch", p)]
    assert _salvaged_ids(tmp_path / "s.ndjson") == {m["message_id"] for m in acc} - {victim["message_id"]}


# ---- Kafka ---------------------------------------------------------------------------------------

def _kafka(tmp_path):
    src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append")
    exp = load_json(src / "expected.json")
    return _copy(src, tmp_path / "broker-append"), exp


def test_kafka_deleted_middle_segment_is_a_segment_gap(run_cli, tmp_path):
    store, exp = _kafka(tmp_path)
    part = store / "forensics-0"
    for suf in (".log", ".index", ".timeindex"):
        (part / f"00000000000000000037{suf}").unlink()
    code, fs, s = _verify(run_cli, store)
    gap = [f for f in fs if f["code"] == "kafka.segment-gap"]
    assert [(f["severity"], Path(f["file"]).name, f["expected"], f["actual"]) for f in gap] == \
        [("error", "00000000000000000080.log", 37, 80)]       # issue #15: a lost segment is an error


def test_kafka_zeroed_inactive_segment_is_not_preallocation(run_cli, tmp_path):
    store, exp = _kafka(tmp_path)
    log = store / "forensics-0" / "00000000000000000037.log"
    log.write_bytes(bytes(log.stat().st_size))
    code, fs, s = _verify(run_cli, store)
    z = [(f["severity"], f["position"]) for f in fs if f["code"] == "kafka.zeroed-range"]
    assert code == 1 and z == [("warning", 0)]
    assert not [f for f in fs if f["code"] == "kafka.zero-tail" and f["file"] == str(log)]


def test_kafka_batch_with_bad_crc_is_no_offset_reference(run_cli, tmp_path):
    """A flipped lastOffsetDelta fails the CRC; the next batch is not blamed for not following it."""
    store, exp = _kafka(tmp_path)
    seg37 = [b for b in exp["batches"] if b["segment"] == 37 and b["magic"] == 2]
    b = seg37[2]
    log = store / "forensics-0" / "00000000000000000037.log"
    data = bytearray(log.read_bytes())
    data[b["position"] + 26] ^= 0x10                          # lastOffsetDelta += 16
    log.write_bytes(data)
    code, fs, s = _verify(run_cli, store)
    errs = [(f["code"], f["position"]) for f in fs if f["severity"] == "error" and f["file"] == str(log)]
    assert errs == [("kafka.crc-mismatch", b["position"])]


def test_kafka_txn_state_survives_damage_in_an_earlier_segment(run_cli, tmp_path):
    """Damage in segment 80 before pid 4000's first batch (89) used to make segment 93's .txnindex entry
    (first offset 89) look wrong."""
    store, exp = _kafka(tmp_path)
    seg80 = [b for b in exp["batches"] if b["segment"] == 80]
    b = next(x for x in seg80 if x["baseOffset"] == 83)
    log = store / "forensics-0" / "00000000000000000080.log"
    data = bytearray(log.read_bytes())
    data[b["position"] + 18] ^= 0x01                          # its CRC
    log.write_bytes(data)
    code, fs, s = _verify(run_cli, store)
    assert not [f for f in fs if f["code"].startswith("kafka.txnindex") and "00000000000000000093" in f["file"]]
    assert ("kafka.crc-mismatch", b["position"]) in [(f["code"], f["position"]) for f in fs]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_kafka_fifo_segment_is_skipped_with_a_finding(run_cli, tmp_path):
    store, exp = _kafka(tmp_path)
    fifo = store / "forensics-0" / "00000000000000000200.log"
    os.mkfifo(fifo)
    code, fs, s = _verify(run_cli, store)
    assert code == 1 and [(f["code"], f["file"]) for f in fs if f["code"] == "kafka.file-unreadable"] == \
        [("kafka.file-unreadable", str(fifo))]
    assert s["batches"] == len(exp["batches"])                 # every other segment was still read


# ---- a file that shrinks while being read ---------------------------------------------------------------

_SHRINK = r"""
import os, sys
from pathlib import Path
from mqtool import io
io.READ_WHOLE_LIMIT = 0                      # map every file (what large files get)
family, store, victim, cut, trigger = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
out = []
if family == "litemq":
    from mqtool.litemq.store import resolve
    from mqtool.litemq.scan import walk
    events = walk(resolve(store), carve_stale=True)
else:
    from mqtool.kafka.ops import verify
    from mqtool.options import VerifyOptions
    events, _ = verify("store", Path(store), VerifyOptions(progress=False))
done = False
for ev in events:
    out.append(getattr(ev, "code", "record"))
    if out[-1] == trigger and not done:          # the victim is being read now
        os.truncate(victim, cut)
        done = True
print(" ".join(out))
"""


@pytest.mark.parametrize("family", ["litemq", "kafka"])
def test_file_that_shrinks_while_being_read(tmp_path, family):
    """Truncated under a mapped scan: a file-changed finding and a clean stop (a separate process: touching a
    lost page would kill it with SIGBUS, not pytest)."""
    import subprocess
    import sys

    from conftest import ROOT

    if family == "litemq":
        store, acc = _litemq(tmp_path)
        victim = store / "commitlog" / "00000000000000000000"
    else:
        src = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "recovered", "forensics-0")
        store = _copy(src, tmp_path / "forensics-0")
        victim = store / "00000000000000000037.log"
        data = bytearray(victim.read_bytes())
        data[18] ^= 1                               # the first batch's CRC: a finding while 37 is read
        victim.write_bytes(data)
    trigger = "record" if family == "litemq" else "kafka.crc-mismatch"
    r = subprocess.run([sys.executable, "-c", _SHRINK, family, str(store), str(victim), "300", trigger],
                       capture_output=True,
                       text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    codes = r.stdout.split()
    assert codes.count("file-changed" if family == "litemq" else "kafka.file-changed") == 1, codes
