"""mqtool carve: records of every family found in arbitrary bytes.

Images are built here: seeded random bytes around real segments (../shared/realdata, read in place) and
builder-made units at odd positions, partial first/last records, damaged copies. Expected values come from
the realdata expected.json files and the builders' inputs.
"""
from __future__ import annotations

import json
import random

import pytest

from builders import kafka_batch, rocketmq_unit
from conftest import load_json, require_realdata
from mqtool import native
from mqtool.carve import CarveSummary, carve
from mqtool.kafka import carve as kafka_carve
from mqtool.options import CarveOptions

RMQ = ("rocketmq", "gen-4.9.7-clean")
KAFKA = ("kafka", "generated-4.0.0-SNAPSHOT", "broker-append")
LITEMQ = ("litemq", "clean")


def _rows(path, **kw):
    summary = CarveSummary()
    rows = list(carve([str(path)], CarveOptions(**kw), summary))
    return rows, summary


def _image(tmp_path, parts, name="disk.img"):
    """Write the parts back to back; returns (path, start position of every part)."""
    at, pos = [], 0
    for p in parts:
        at.append(pos)
        pos += len(p)
    img = tmp_path / "images" / name
    img.parent.mkdir(exist_ok=True)
    img.write_bytes(b"".join(parts))
    return img, at


def _noise(rng, n):
    return rng.randbytes(n)


# ---- no false positives ------------------------------------------------------------------------------------

def test_random_bytes_carve_nothing(tmp_path):
    img = tmp_path / "random.img"
    img.write_bytes(random.Random(20261124).randbytes(64 << 20))
    rows, summary = _rows(img)
    assert rows == []
    assert summary.bytes_scanned == 64 << 20 and summary.total == 0


def test_kafka_python_search_equals_compiled(tmp_path, monkeypatch):
    """The pure-Python candidate search (no helper) carves what the compiled one does: nothing from random
    bytes, and the same entries from an image of real and built batches."""
    if kafka_carve._finder() is kafka_carve._python_candidate:
        pytest.skip("compiled helper kafka not built (or MQTOOL_NATIVE=0)")
    rng = random.Random(7)
    seg = (require_realdata(*KAFKA, "forensics-0") / "00000000000000000000.log").read_bytes()
    img, _ = _image(tmp_path, [_noise(rng, 4 << 20), seg, _noise(rng, 333), kafka_batch(500, 3), b"\0" * 4099,
                               _noise(rng, 1 << 20)])
    native_rows, _ = _rows(img, families=("kafka",))
    with native.switched(False):
        python_rows, _ = _rows(img, families=("kafka",))
    assert native_rows == python_rows
    assert len(native_rows) == sum(1 for b in load_json(require_realdata(*KAFKA, "expected.json"))["batches"]
                                   if b["segment"] == 0) + 1


# ---- RocketMQ ----------------------------------------------------------------------------------------------

def test_rocketmq_real_segments_at_odd_positions(tmp_path):
    root = require_realdata(*RMQ)
    expected = {m["commitLogOffset"]: m for m in load_json(root / "expected.json")["messages"]}
    cl = root / "store" / "commitlog"
    rng = random.Random(1)
    seg0, seg1 = (cl / "00000000000000000000").read_bytes(), (cl / "00000000000000065536").read_bytes()
    img, at = _image(tmp_path, [_noise(rng, 12345), seg1, _noise(rng, 7), seg0, _noise(rng, 999)])
    rows, summary = _rows(img, families=("rocketmq",))
    want = {o: m for o, m in expected.items() if o < 2 * 65536}
    assert sorted(r["offset"] for r in rows) == sorted(want)
    for r in rows:
        m = want[r["offset"]]
        base, start = (65536, at[1]) if r["offset"] >= 65536 else (0, at[3])
        assert r["family"] == "rocketmq" and r["kind"] == "message" and r["image"] == str(img)
        assert r["image_position"] == start + r["offset"] - base
        assert (r["size"], r["topic"], r["msg_id"]) == (m["wroteBytes"], m["storedTopic"], m["msgId"])
        assert r["crc_ok"] is True and r["physical_offset"] == r["offset"]
    assert summary.runs["rocketmq"] == 2


def test_rocketmq_partial_and_damaged_units(tmp_path, run_cli):
    """Built units at an odd position: a unit cut at the start and one cut at the end are not carved; a unit
    with one flipped body byte is not carved, its neighbours are."""
    bodies = [f"body {i} ".encode().ljust(100, b"x") for i in range(6)]
    size = len(rocketmq_unit(body=bodies[0]))
    units = [rocketmq_unit(body=bodies[i], phys=10_000 + size * i, queue_offset=i) for i in range(6)]
    blob = bytearray(b"".join(units))
    blob[blob.find(b"body 3")] ^= 0x20                            # unit 3: one body byte flipped
    cut = 150                                                      # unit 0 loses its first 150 bytes
    assert size > cut
    rng = random.Random(2)
    img, at = _image(tmp_path, [_noise(rng, 1001), bytes(blob[cut:-37]), _noise(rng, 13)])  # unit 5 cut short
    rows, summary = _rows(img, families=("rocketmq",))
    assert [r["offset"] for r in rows] == [10_000 + size * i for i in (1, 2, 4)]
    assert [r["image_position"] for r in rows] == [1001 + size * i - cut for i in (1, 2, 4)]
    assert [r["queue_offset"] for r in rows] == [1, 2, 4]
    assert [r["body_size"] for r in rows] == [100] * 3
    assert summary.runs["rocketmq"] == 2
    # the --json lane cuts its block at the unit with the wrong CRC: the same rows
    code, out, err = run_cli("carve", img, "--json", "--family", "rocketmq")
    assert code == 0, err
    from mqtool import ndjson
    assert out.splitlines()[:-1] == [ndjson.dumps(r) for r in rows]


# ---- Kafka -------------------------------------------------------------------------------------------------

def test_kafka_real_segments_every_magic(tmp_path):
    root = require_realdata(*KAFKA)
    exp = load_json(root / "expected.json")
    rng = random.Random(3)
    parts, bases = [_noise(rng, 4097)], []
    for base in exp["segmentBaseOffsets"]:
        parts.append((root / "forensics-0" / f"{base:020d}.log").read_bytes())
        bases.append(base)
        parts.append(_noise(rng, 1 + base))
    img, at = _image(tmp_path, parts)
    rows, _ = _rows(img, families=("kafka",))
    starts = {b: at[1 + 2 * i] for i, b in enumerate(bases)}
    got = [(r["image_position"], r["offset"], r["size"], r["magic"], r["crc"]) for r in rows]
    want = [(starts[b["segment"]] + b["position"], b["baseOffset"], b["size"], b["magic"], b["crc"])
            for b in exp["batches"]]
    assert got == want
    assert {r["magic"] for r in rows} == {0, 1, 2} and all(r["kind"] == "batch" for r in rows)


def test_kafka_deep_records_and_damage(tmp_path):
    rng = random.Random(4)
    batches = [kafka_batch(100, 3), kafka_batch(103, 2), kafka_batch(105, 4), kafka_batch(109, 1)]
    blob = bytearray(b"".join(batches))
    k = len(batches[0]) + len(batches[1]) + 70         # a byte inside the third batch (CRC-covered)
    blob[k] ^= 0xFF
    img, at = _image(tmp_path, [_noise(rng, 3), bytes(blob), _noise(rng, 5)])
    rows, summary = _rows(img, families=("kafka",), deep=True)
    assert [(r["kind"], r["offset"]) for r in rows] == [
        ("batch", 100), ("record", 100), ("record", 101), ("record", 102),
        ("batch", 103), ("record", 103), ("record", 104),
        ("batch", 109), ("record", 109)]
    assert [r["key_size"] for r in rows if r["kind"] == "record"] == [2, 2, 2, 2, 2, 2]
    assert summary.carved["kafka"] == 3 and summary.runs["kafka"] == 2


# ---- LiteMQ ------------------------------------------------------------------------------------------------

def _litemq_file(root, index: int) -> list[dict]:
    """The expected messages written to commitlog file ``index``, in file order."""
    return sorted((m for m in load_json(root / "expected.json")["messages"]
                   if m.get("commitlog_file") == f"commitlog/{index:020d}"), key=lambda m: m["offset_in_file"])


def test_litemq_real_commitlog_partial(tmp_path):
    root = require_realdata(*LITEMQ)
    msgs = _litemq_file(root, 1)
    data = (root / "data" / "broker" / "commitlog" / "00000000000000000001").read_bytes()
    cut_head = msgs[0]["offset_in_file"] + 9                    # the first record loses its first 9 bytes
    last = msgs[-1]
    cut_tail = last["offset_in_file"] + last["store_size_incl_prefix"] - 10     # ... the last one its last 10
    rng = random.Random(5)
    img, at = _image(tmp_path, [_noise(rng, 777), data[cut_head:cut_tail], _noise(rng, 31)])
    rows, _ = _rows(img, families=("litemq",))
    want = msgs[1:-1]
    assert [r["msg_id"] for r in rows] == [m["message_id"] for m in want]
    assert [r["image_position"] for r in rows] == [777 + m["offset_in_file"] - cut_head for m in want]
    assert [r["size"] for r in rows] == [m["store_size_incl_prefix"] for m in want]
    assert all(r["offset"] is None and r["family"] == "litemq" for r in rows)


def test_litemq_flipped_length_skips_only_that_record(tmp_path):
    root = require_realdata(*LITEMQ)
    msgs = _litemq_file(root, 0)[:6]
    data = bytearray((root / "data" / "broker" / "commitlog" / "00000000000000000000").read_bytes())
    end = msgs[-1]["offset_in_file"] + msgs[-1]["store_size_incl_prefix"]
    data[msgs[2]["offset_in_file"] + 3] ^= 0x01                  # the length prefix of the third record
    img, _ = _image(tmp_path, [b"\x00" * 3, bytes(data[:end]), b"\xff" * 3])
    rows, _ = _rows(img, families=("litemq",))
    assert [r["msg_id"] for r in rows] == [m["message_id"] for i, m in enumerate(msgs) if i != 2]


# ---- salvage and the command -------------------------------------------------------------------------------

def test_salvage_out_reads_back(tmp_path, run_cli):
    rroot, kroot, lroot = require_realdata(*RMQ), require_realdata(*KAFKA), require_realdata(*LITEMQ)
    rexp = {m["commitLogOffset"] for m in load_json(rroot / "expected.json")["messages"]}
    kexp = [b for b in load_json(kroot / "expected.json")["batches"] if b["segment"] == 37]
    lexp = _litemq_file(lroot, 0)
    rng = random.Random(6)
    seg = (rroot / "store" / "commitlog" / "00000000000000065536").read_bytes()
    img, _ = _image(tmp_path, [_noise(rng, 501), seg, _noise(rng, 3),
                               (kroot / "forensics-0" / f"{37:020d}.log").read_bytes(), _noise(rng, 11),
                               (lroot / "data" / "broker" / "commitlog" / f"{0:020d}").read_bytes()])
    out = tmp_path / "out"
    code, stdout, err = run_cli("carve", img, "--salvage-out", out, "--json")
    assert code == 0, err
    summary = json.loads(stdout.splitlines()[-1])
    assert summary["kind"] == "summary" and summary["salvage_files"] == {"rocketmq": 1, "kafka": 1, "litemq": 1}

    code, stdout, err = run_cli("dump", "commitlog", out / "rocketmq", "--json")
    assert code == 0, err
    assert sorted(json.loads(x)["offset"] for x in stdout.splitlines()) == \
        sorted(o for o in rexp if 65536 <= o < 2 * 65536)
    code, stdout, err = run_cli("dump", "kafka", out / "kafka", "--json")
    assert code == 0, err
    assert [(json.loads(x)["offset"], json.loads(x)["crc"]) for x in stdout.splitlines()] == \
        [(b["baseOffset"], b["crc"]) for b in kexp]
    code, stdout, err = run_cli("dump", "commitlog", out / "litemq", "--format", "litemq", "--json")
    assert code == 0, err
    assert [json.loads(x)["msg_id"] for x in stdout.splitlines()] == [m["message_id"] for m in lexp]
    code, _, err = run_cli("verify", "commitlog", out / "kafka")
    assert code == 0, err

    # never over what is there without --force
    code, _, err = run_cli("carve", img, "--salvage-out", out)
    assert code == 2 and "not empty" in err
    code, _, err = run_cli("carve", img, "--salvage-out", out, "--force", "--family", "kafka", "--json")
    assert code == 0, err


def test_cli_exit_codes_and_family_option(tmp_path, run_cli):
    rng = random.Random(8)
    img, _ = _image(tmp_path, [_noise(rng, 5000), kafka_batch(7, 2), _noise(rng, 5000)])
    code, out, _ = run_cli("carve", img, "--json", "--family", "rocketmq,litemq")
    assert code == 1
    assert [json.loads(x)["kind"] for x in out.splitlines()] == ["summary"]
    code, out, _ = run_cli("carve", img, "--json", "--family", "kafka")
    rows = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and [(r["kind"], r.get("offset"), r.get("image_position")) for r in rows[:-1]] == \
        [("batch", 7, 5000)]
    assert list(rows[0])[:4] == ["family", "kind", "image", "image_position"]
    assert rows[-1]["carved"] == {"kafka": 1}
    code, _, err = run_cli("carve", img, "--family", "nosuch")
    assert code == 2 and "nosuch" in err
    code, _, err = run_cli("carve", tmp_path / "missing.img")
    assert code == 2 and "missing.img" in err
    code, out, err = run_cli("carve", img, "--as", "table", "--family", "kafka")
    assert code == 0 and "kafka" in out and "carved 1 record" in err


def test_rocketmq_json_lane_equals_rows(tmp_path, run_cli, monkeypatch):
    """carve --json: the compiled lane's lines are the bytes of the rows the Python path builds (and the
    same with the compiled decoder off)."""
    from mqtool import ndjson

    root = require_realdata(*RMQ)
    cl = root / "store" / "commitlog"
    rng = random.Random(9)
    img, _ = _image(tmp_path, [_noise(rng, 3), (cl / "00000000000000000000").read_bytes(), _noise(rng, 5),
                               (cl / "00000000000000196608").read_bytes()])
    code, out, err = run_cli("carve", img, "--json", "--family", "rocketmq")
    assert code == 0, err
    lines = out.splitlines()[:-1]
    rows, _ = _rows(img, families=("rocketmq",))
    assert lines == [ndjson.dumps(r) for r in rows] and len(lines) > 100
    monkeypatch.setenv("MQTOOL_NATIVE", "0")
    code, out2, err = run_cli("carve", img, "--json", "--family", "rocketmq")
    assert code == 0 and out2 == out, err


def test_records_inside_a_carved_record_are_payload(tmp_path):
    """A Kafka batch carried in a RocketMQ message body starts inside a carved run: it is payload, not
    carved; the same batch on its own is."""
    batch = kafka_batch(77, 2)
    unit = rocketmq_unit(body=b"<" + batch + b">", phys=4242)
    rng = random.Random(10)
    img, at = _image(tmp_path, [_noise(rng, 101), unit, _noise(rng, 3), batch, _noise(rng, 7)])
    rows, summary = _rows(img)
    assert [(r["family"], r["image_position"], r["offset"]) for r in rows] == \
        [("rocketmq", at[1], 4242), ("kafka", at[3], 77)]


def test_salvage_duplicate_copies_go_to_separate_stores(tmp_path, run_cli):
    """The same segment twice in an image (two copies of a file): the second copy's runs overlap the first's
    offsets, so they go to a second store / partition, each readable on its own."""
    size = len(rocketmq_unit(body=b"m0"))
    units = b"".join(rocketmq_unit(body=f"m{i}".encode(), phys=5000 + size * i, queue_offset=i) for i in range(3))
    batches = kafka_batch(10, 2) + kafka_batch(12, 1)
    rng = random.Random(11)
    img, _ = _image(tmp_path, [_noise(rng, 9), units, batches, _noise(rng, 9), units, batches, _noise(rng, 9)])
    out = tmp_path / "out"
    code, stdout, err = run_cli("carve", img, "--salvage-out", out, "--json", "--family", "rocketmq,kafka")
    assert code == 0, err
    assert json.loads(stdout.splitlines()[-1])["salvage_files"] == {"kafka": 2, "rocketmq": 2}
    for store in ("rocketmq", "rocketmq-2"):
        code, stdout, err = run_cli("dump", "commitlog", out / store, "--json")
        assert code == 0, err
        assert [json.loads(x)["queue_offset"] for x in stdout.splitlines()] == [0, 1, 2]
        assert (out / store / "commitlog" / f"{5000:020d}").read_bytes() == units
    for part in ("carved-0", "carved-1"):
        code, stdout, err = run_cli("dump", "kafka", out / "kafka" / part, "--json")
        assert code == 0, err
        assert [json.loads(x)["offset"] for x in stdout.splitlines()] == [10, 12]
        assert (out / "kafka" / part / f"{10:020d}.log").read_bytes() == batches


def test_crafted_headers_cannot_make_the_search_quadratic(tmp_path, monkeypatch):
    """An image of thousands of plausible Kafka headers each claiming ~64 KiB (CRC wrong) would cost a CRC
    over 64 KiB per candidate: past the checking budget (shrunk here) those candidates are counted, not
    checked; a genuine small batch after them is still carved; the work stays within the budget plus one
    candidate; the summary carries `unchecked`."""
    from mqtool import carve as C

    big = bytearray(kafka_batch(0, 1, pad=65536))
    big[-1] ^= 0xFF                                         # the CRC no longer matches
    head = bytes(big[:61])
    img, at = _image(tmp_path, [head * 3000, bytes(big), kafka_batch(700, 3)])
    clean, _ = _rows(img, families=("kafka",))
    monkeypatch.setattr(C, "CHECK_BUDGET_FLOOR", 1 << 20)
    monkeypatch.setattr(C, "CHECK_BUDGET_FACTOR", 0)
    spent = []
    real_afford = C.Scope.afford

    def afford(self, claimed):
        ok = real_afford(self, claimed)
        spent.append(self.spent)
        return ok

    monkeypatch.setattr(C.Scope, "afford", afford)
    rows, summary = _rows(img, families=("kafka",))
    assert [(r["offset"], r["image_position"]) for r in rows] == [(700, at[2])]
    assert [(r["offset"], r["image_position"]) for r in clean] == [(700, at[2])]
    assert summary.unchecked["kafka"] > 2000
    assert max(spent) <= (1 << 20) + len(big)
    assert summary.to_dict()["unchecked"] == {"kafka": summary.unchecked["kafka"]}
