"""mqtool diff: two copies of one store made to diverge in known ways. Every expected value comes from the
modification the test made (and the realdata manifests' expected.json), never from mqtool's output."""
from __future__ import annotations

import json
import os
import shutil
import struct

from click.testing import CliRunner

from mqtool.cli import cli
from tests.builders import kafka_batch, rocketmq_units
from tests.conftest import require_realdata

RMQ_V1_BODY = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4   # v1, IPv4 hosts: fields before BODY


def run(*args):
    r = CliRunner().invoke(cli, ["diff", *map(str, args), "--json"])
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    return r.exit_code, [x for x in rows if x["kind"] == "difference"], next((x for x in rows if x["kind"] == "summary"), None), r


def copies(src, tmp_path, name="store"):
    a, b = tmp_path / "a" / name, tmp_path / "b" / name
    shutil.copytree(src, a)
    shutil.copytree(src, b)
    return a, b


def flip(path, pos, mask=0x01):
    data = bytearray(path.read_bytes())
    data[pos] ^= mask
    path.write_bytes(bytes(data))


# ---- RocketMQ (real stores written by the broker's own store code) -------------------------------------

def _rmq(tmp_path):
    root = require_realdata("rocketmq", "gen-5.1.4-clean")
    exp = json.loads((root / "expected.json").read_text())["messages"]
    offsets = sorted(int(i[-16:], 16) for e in exp for i in (e.get("msgId") or e["msgIds"]).split(","))
    return (*copies(root / "store", tmp_path), exp, offsets)


def _segment_of(store, offset):
    names = sorted(os.listdir(store / "commitlog"))
    base = max(int(n) for n in names if int(n) <= offset)
    return store / "commitlog" / f"{base:020d}", base


def test_rocketmq_identical_copies(tmp_path):
    a, b, _, _ = _rmq(tmp_path)
    code, diffs, s, _ = run(a, b)
    assert code == 0 and diffs == []
    assert s["identical"] is True and s["differing"] == s["only_in_a"] == s["only_in_b"] == 0
    assert s["first_divergence"] is None


def test_rocketmq_body_byte_flipped(tmp_path):
    a, b, exp, _ = _rmq(tmp_path)
    m = next(e for e in exp if e["sentTopic"] == "TopicA" and e.get("storedSysFlag") == 0 and e.get("storedBodyLength", 0) > 8
             and "[" not in e["bornHost"] + e["storeHost"])
    off = m["commitLogOffset"]
    seg, base = _segment_of(b, off)
    flip(seg, off - base + RMQ_V1_BODY + 3)
    code, diffs, s, _ = run(a, b)
    assert code == 1
    assert s["identical"] is False and s["differing"] == 1 and s["only_in_a"] == s["only_in_b"] == 0
    assert s["first_divergence"] == off
    fields = {d["field"]: d for d in diffs if d["what"] == "content"}
    assert {d["offset"] for d in diffs} == {off}
    assert fields["body"]["at"] == 3 and fields["body"]["encoding"] == "base64"
    assert fields["crc_ok"]["a"] is True and fields["crc_ok"]["b"] is False
    assert set(fields) == {"body", "crc_ok"}     # nothing else in the message changed


def test_rocketmq_b_truncated_and_a_has_extra_segment(tmp_path):
    a, b, _, offsets = _rmq(tmp_path)
    last = sorted(os.listdir(b / "commitlog"))[-1]
    prev = sorted(os.listdir(b / "commitlog"))[-2]
    (b / "commitlog" / last).unlink()                    # A has a segment B lacks
    seg_prev = b / "commitlog" / prev
    cut = next(o for o in offsets if o > int(prev) + 20000)    # B's previous segment ends at a message boundary
    os.truncate(seg_prev, cut - int(prev))
    code, diffs, s, _ = run(a, b, "--log-only")
    assert code == 1
    lost = [o for o in offsets if o >= cut]
    assert s["only_in_a"] == len(lost) and s["only_in_b"] == 0 and s["differing"] == 0
    only = [d for d in diffs if d["what"] == "only_in_a"]
    assert len(only) == 1                                 # one range, not one row per message
    assert only[0]["offset"] == cut == s["first_divergence"] and only[0]["last_offset"] == lost[-1]
    assert only[0]["count"] == len(lost)


def test_rocketmq_b_has_more_is_only_in_b(tmp_path):
    a, b, _, offsets = _rmq(tmp_path)
    last = sorted(os.listdir(a / "commitlog"))[-1]
    (a / "commitlog" / last).unlink()
    code, diffs, s, _ = run(a, b, "--log-only")
    assert code == 1 and s["only_in_a"] == 0
    assert s["only_in_b"] == len([o for o in offsets if o >= int(last)])


def test_rocketmq_cq_unit_changed(tmp_path):
    a, b, _, _ = _rmq(tmp_path)
    f = b / "consumequeue" / "TopicA" / "0" / "00000000000000000000"
    data = bytearray(f.read_bytes())
    phys, size, tags = struct.unpack_from(">qiq", data, 3 * 20)       # unit 3: offset, size, tags code
    struct.pack_into(">i", data, 3 * 20 + 8, size + 7)
    f.write_bytes(bytes(data))
    code, diffs, s, _ = run(a, b)
    assert code == 1
    assert s["log_identical"] is True and s["identical"] is False and s["cq_differing"] == 1
    [d] = diffs
    assert (d["what"], d["where"], d["offset"], d["field"], d["a"], d["b"]) == ("cq", "TopicA/0", 3, "size", size,
                                                                                  size + 7)


def test_rocketmq_generated_segments(tmp_path):
    """Generated commitlogs (schema-built units): A has 12 messages, B the first 9 plus a changed 5th body."""
    for side, n in (("a", 12), ("b", 9)):
        d = tmp_path / side / "commitlog"
        d.mkdir(parents=True)
        (d / f"{0:020d}").write_bytes(rocketmq_units(n, topic=b"T"))
    ua = rocketmq_units(12, topic=b"T")
    sizes = [len(rocketmq_units(i, topic=b"T")) for i in range(13)]
    fb = tmp_path / "b" / "commitlog" / f"{0:020d}"
    flip(fb, sizes[4] + RMQ_V1_BODY)                    # first body byte of message 4
    code, diffs, s, _ = run(tmp_path / "a" / "commitlog", tmp_path / "b" / "commitlog")
    assert code == 1 and len(ua) == sizes[12]
    assert s["differing"] == 1 and s["only_in_a"] == 3 and s["first_divergence"] == sizes[4]
    only = [d for d in diffs if d["what"] == "only_in_a"]
    assert (only[0]["offset"], only[0]["last_offset"], only[0]["count"]) == (sizes[9], sizes[11], 3)


# ---- Kafka ---------------------------------------------------------------------------------------------

def _kafka(tmp_path):
    root = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append")
    exp = json.loads((root / "expected.json").read_text())
    return (*copies(root / "forensics-0", tmp_path, "forensics-0"), exp)


def test_kafka_identical_log_dirs(tmp_path):
    root = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append")
    a, b = copies(root, tmp_path, "logs")
    code, diffs, s, _ = run(a, b)
    assert code == 0 and diffs == [] and s["identical"] is True


def test_kafka_follower_missing_last_batch(tmp_path):
    a, b, exp = _kafka(tmp_path)
    last = exp["batches"][-1]
    os.truncate(b / f"{last['segment']:020d}.log", last["position"])
    code, diffs, s, _ = run(a, b, "--log-only")
    assert code == 1
    n = last["lastOffset"] - last["baseOffset"] + 1
    assert s["only_in_a"] == n and s["only_in_b"] == 0 and s["differing"] == 0
    [d] = diffs
    assert (d["what"], d["offset"], d["last_offset"], d["count"], d["where"]) == (
        "only_in_a", last["baseOffset"], last["lastOffset"], n, "forensics-0")


def test_kafka_record_value_changed(tmp_path):
    a, b, exp = _kafka(tmp_path)
    batch = next(x for x in exp["batches"] if x["codec"] == "none" and x["magic"] == 2)
    seg = b / f"{batch['segment']:020d}.log"
    flip(seg, batch["position"] + batch["size"] - 2)           # inside the last record (its value / headers)
    code, diffs, s, _ = run(a, b, "--log-only")
    assert code == 1 and s["differing"] == 1 and s["first_divergence"] == batch["baseOffset"]
    fields = {d["field"] for d in diffs}
    assert "batch.crc_ok" in fields
    assert {d["offset"] for d in diffs if not d["field"].startswith("batch.")} == {batch["lastOffset"]}


def test_kafka_generated_partition_and_index(tmp_path):
    """Two generated partition directories: B lacks the third batch, and its .index has one entry changed."""
    batches = [kafka_batch(0, 3), kafka_batch(3, 4), kafka_batch(7, 2)]
    for side, bs in (("a", batches), ("b", batches[:2])):
        d = tmp_path / side / "t-0"
        d.mkdir(parents=True)
        (d / f"{0:020d}.log").write_bytes(b"".join(bs))
        (d / f"{0:020d}.index").write_bytes(struct.pack(">ii", 3, len(batches[0])) + bytes(8 * 9))
    ib = tmp_path / "b" / "t-0" / f"{0:020d}.index"
    ib.write_bytes(struct.pack(">ii", 3, len(batches[0]) + 1) + bytes(8 * 9))
    code, diffs, s, _ = run(tmp_path / "a" / "t-0", tmp_path / "b" / "t-0")
    assert code == 1 and s["only_in_a"] == 2 and s["index_differing"] == 1
    by = {d["what"]: d for d in diffs}
    assert (by["only_in_a"]["offset"], by["only_in_a"]["last_offset"]) == (7, 8)
    assert (by["index"]["offset"], by["index"]["field"], by["index"]["a"], by["index"]["b"]) == (
        3, "position", len(batches[0]), len(batches[0]) + 1)


# ---- LiteMQ --------------------------------------------------------------------------------------------

def _chain(buf):
    """Record starts of a LiteMQ commitlog file: big-endian u32 length prefixes back to back until a zero."""
    p, out = 0, []
    while p + 4 <= len(buf):
        (n,) = struct.unpack_from(">I", buf, p)
        if n == 0:
            break
        out.append((p, n))
        p += 4 + n
    return out


def test_litemq_record_changed_and_identical(tmp_path):
    from formats import litemq as F

    root = require_realdata("litemq", "clean", "data", "broker")
    a, b = copies(root, tmp_path, "broker")
    code, diffs, s, _ = run(a, b)
    assert code == 0 and s["identical"] is True
    f = b / "commitlog" / f"{0:020d}"
    buf = f.read_bytes()
    start, n = _chain(buf)[2]
    rec = F.Message.parse(buf[start + 4:start + 4 + n])
    assert len(rec.Body) > 0
    at = buf.index(rec.Body, start)
    flip(f, at)
    code, diffs, s, _ = run(a, b, "--log-only")
    assert code == 1 and s["differing"] == 1 and s["first_divergence"] == start
    [d] = diffs
    assert (d["what"], d["field"], d["offset"], d["at"]) == ("content", "body", start, 0)


def test_litemq_cq_entry_changed(tmp_path):
    root = require_realdata("litemq", "clean", "data", "broker")
    a, b = copies(root, tmp_path, "broker")
    f = b / "consumequeue" / "audit_log" / "0" / f"{0:020d}"
    data = bytearray(f.read_bytes())
    ts = struct.unpack_from(">q", data, 16)[0]            # entry 0: CommitLogOffset, Size, TagHash, Timestamp
    struct.pack_into(">q", data, 16, ts + 1)
    f.write_bytes(bytes(data))
    code, diffs, s, _ = run(a, b)
    assert code == 1 and s["cq_differing"] == 1 and s["log_identical"] is True
    [d] = diffs
    assert (d["what"], d["where"], d["offset"], d["field"], d["a"], d["b"]) == ("cq", "audit_log/0", 0, "timestamp",
                                                                              ts, ts + 1)


# ---- usage ---------------------------------------------------------------------------------------------

def test_different_families_and_missing_input_exit_2(tmp_path):
    r = require_realdata("rocketmq", "gen-5.1.4-clean", "store")
    k = require_realdata("kafka", "generated-4.0.0-SNAPSHOT", "broker-append", "forensics-0")
    code, _, _, res = run(r, k)
    assert code == 2 and "diff compares two copies" in res.stderr
    code, _, _, res = run(r, tmp_path / "nope")
    assert code == 2 and "Traceback" not in res.output


def test_limit_caps_rows_not_counts(tmp_path):
    a, b, exp, _ = _rmq(tmp_path)
    for m in [e for e in exp if e["sentTopic"] == "TopicA" and e.get("storedSysFlag") == 0][:4]:
        seg, base = _segment_of(b, m["commitLogOffset"])
        flip(seg, m["commitLogOffset"] - base + RMQ_V1_BODY)
    code, diffs, s, _ = run(a, b, "--log-only", "--limit", "1")
    assert code == 1 and len(diffs) == 1 and s["differing"] == 4 and s["difference_rows"] > 1


def _write_log(path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _units(bodies, base=0):
    """Schema-built RocketMQ units with the given bodies, each PHYSICALOFFSET where it sits."""
    from tests.builders import rocketmq_unit

    out, starts = bytearray(), []
    for i, body in enumerate(bodies):
        starts.append(base + len(out))
        out += rocketmq_unit(topic=b"T", body=body, phys=base + len(out), queue_offset=i)
    return bytes(out), starts


def test_rocketmq_out_of_step_framing_gives_one_range_per_side(tmp_path):
    """B's 4th message has a longer body: every later message sits at other offsets in B than in A."""
    bodies = [f"message {i}".encode() for i in range(10)]
    la, sa = _units(bodies)
    lb, sb = _units(bodies[:3] + [b"a much longer body than before"] + bodies[4:])
    _write_log(tmp_path / "a" / "commitlog" / f"{0:020d}", la)
    _write_log(tmp_path / "b" / "commitlog" / f"{0:020d}", lb)
    code, diffs, s, _ = run(tmp_path / "a" / "commitlog", tmp_path / "b" / "commitlog")
    assert code == 1 and s["differing"] == 1 and s["first_divergence"] == sa[3] == sb[3]
    assert s["only_in_a"] == 6 and s["only_in_b"] == 6
    ranges = {d["what"]: (d["offset"], d["last_offset"], d["count"]) for d in diffs if d["what"].startswith("only")}
    assert ranges == {"only_in_a": (sa[4], sa[9], 6), "only_in_b": (sb[4], sb[9], 6)}


def test_rocketmq_decodes_only_around_the_difference(tmp_path, monkeypatch):
    from mqtool.rocketmq import diff as engine

    bodies = [f"message {i}".encode() for i in range(200)]
    log, starts = _units(bodies)
    _write_log(tmp_path / "a" / "commitlog" / f"{0:020d}", log)
    changed = bytearray(log)
    changed[starts[120] + RMQ_V1_BODY] ^= 0x20               # 'm' -> 'M' in message 120's body
    _write_log(tmp_path / "b" / "commitlog" / f"{0:020d}", bytes(changed))
    seen = []
    real = engine.units

    def counting(seg, start, stop=None):
        for u in real(seg, start, stop):
            seen.append(u.offset)
            yield u

    monkeypatch.setattr(engine, "units", counting)
    code, diffs, s, _ = run(tmp_path / "a" / "commitlog", tmp_path / "b" / "commitlog")
    assert code == 1 and s["differing"] == 1 and {d["offset"] for d in diffs} == {starts[120]}
    assert sorted(set(seen)) == [starts[120]]                 # one message decoded on each side, no more


def test_rocketmq_index_files_paired_by_order_not_name(tmp_path):
    """A slave creates its index files at other moments (their names) than its master: same content, equal."""
    a, b, _, _ = _rmq(tmp_path)
    names = sorted(os.listdir(b / "index"))
    for i, n in enumerate(reversed(names)):              # later names first, so no rename clobbers another
        (b / "index" / n).rename(b / "index" / str(int(n) + 1000 + i))
    code, diffs, s, _ = run(a, b)
    assert code == 0 and s["identical"] is True and diffs == []
    f = b / "index" / sorted(os.listdir(b / "index"))[0]
    data = bytearray(f.read_bytes())
    count = struct.unpack_from(">i", data, 36)[0]         # IndexHeader: 4 x 8-byte fields, hashSlotCount, indexCount
    struct.pack_into(">i", data, 36, count + 1)
    f.write_bytes(bytes(data))
    code, diffs, s, _ = run(a, b)
    assert code == 1 and s["log_identical"] is True and s["index_differing"] >= 1
    assert any(d["field"] == "header.indexCount" and (d["a"], d["b"]) == (count, count + 1) for d in diffs)
