"""Named regressions of hostile inputs found by adversarial testing (session 7): each failed before its fix.
The generative harness over mutated stores is tests/test_common_hostile_generative.py."""
from __future__ import annotations

import json
import shutil

import pytest

from conftest import FIXTURES


def _rows(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def test_hash_of_a_symlink_loop_is_an_unreadable_entry(tmp_path, run_cli):
    """`hash LOOP` raised RuntimeError from Path.resolve() (a traceback); it lists the loop as unreadable."""
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    code, out, err = run_cli("hash", loop, "--json")
    rows = _rows(out)
    assert code == 1, err
    assert [(r["path"], r["type"]) for r in rows if r["kind"] == "manifest_entry"] == [("loop", "unreadable")]
    assert rows[-1]["kind"] == "manifest" and rows[-1]["unhashed"] == 1


def test_litemq_commitlog_directory_that_is_a_symlink(tmp_path, run_cli):
    """A LiteMQ data directory whose commitlog/ is a symlink to another disk, given as the path: it was
    'not in the subpath' (exit 2, Path.relative_to's message); it is the store's commitlog, as through the
    root."""
    store = shutil.copytree(FIXTURES / "litemq" / "store", tmp_path / "data")
    elsewhere = tmp_path / "disk2" / "commitlog"
    elsewhere.parent.mkdir()
    shutil.move(store / "commitlog", elsewhere)
    (store / "commitlog").symlink_to(elsewhere)
    code, via_root, err = run_cli("dump", "commitlog", store, "--json")
    assert code == 0, err
    code, via_link, err = run_cli("dump", "commitlog", store / "commitlog", "--json")
    assert code == 0, err
    assert _rows(via_link) == _rows(via_root) and len(_rows(via_root)) > 0


def test_rocketmq_consumer_offset_that_overflows_to_infinity(tmp_path, run_cli):
    """consumerOffset.json holding ``1e999999`` (valid JSON syntax, a float that overflows) made `info` and
    `report` raise OverflowError from int(inf); the config reader refuses non-finite numbers and NaN/Infinity
    with the byte position, and the reader falls back to the .bak."""
    store = shutil.copytree(FIXTURES / "rocketmq" / "store", tmp_path / "store")
    cfg = store / "config" / "consumerOffset.json"
    good = cfg.read_bytes()
    (store / "config" / "consumerOffset.json.bak").write_bytes(good)
    for bad in (b'{"offsetTable":{"Orders@billing":{0:1e999999}}}', b'{"offsetTable":{"Orders@billing":{0:NaN}}}'):
        cfg.write_bytes(bad)
        code, out, err = run_cli("dump", "config", store, "--json")
        rows = {r["name"]: r for r in _rows(out)}
        assert rows["consumerOffset.json"]["ok"] is False, rows
        assert rows["consumerOffset.json"]["error"].endswith("at byte 36"), rows      # the number's first byte
        code, out, err = run_cli("info", store, "--json")
        assert code in (0, 1), err
        info = _rows(out)[0]
        assert {(c["group"], c["queue"], c["committed"], c["source"]) for c in info["consumers"]} == {
            ("billing", 0, 18, "config/consumerOffset.json.bak"), ("billing", 1, 15, "config/consumerOffset.json.bak")}
        code, out, err = run_cli("report", store, "-o", tmp_path / "r.html", "--force")
        assert code in (0, 1), err


def test_rocketmq_info_when_no_index_file_can_be_read(tmp_path, run_cli):
    """The only index file a symlink loop (found by `fuzz/cli.py --hostile`): `info` and `report` raised
    AttributeError (no geometry learned); the geometry is 'unknown' and the file a note."""
    store = shutil.copytree(FIXTURES / "rocketmq" / "store", tmp_path / "store")
    (idx,) = (store / "index").iterdir()
    idx.unlink()
    idx.symlink_to(idx.name)
    code, out, err = run_cli("info", store, "--json")
    assert code in (0, 1), err
    info = _rows(out)[0]
    assert any(idx.name in n and "unreadable" in n for n in info["notes"]), info["notes"]
    code, out, err = run_cli("report", store, "-o", tmp_path / "r.html", "--force")
    assert code in (0, 1), err


def test_carve_deep_goes_on_past_a_batch_whose_records_do_not_decode(tmp_path, run_cli, monkeypatch):
    """`carve --deep` over a batch of more records than the cap (as a compression bomb past 256 MiB) ended the
    whole carve with exit 2 and one line naming neither image nor position; the batch row stays, it is
    counted `undecodable` with image@position, and the batches after it are carved."""
    from builders import kafka_batch, kafka_builder, kafka_codec_batch
    from formats import kafka as K

    monkeypatch.setenv("MQTOOL_KAFKA_MAX_BATCH_RECORDS", "10")
    B = kafka_builder()
    first = kafka_batch(0, 1)
    bomb = kafka_codec_batch(1, [B.record(i, 0, None, b"v") for i in range(50)], K.CODEC_ZSTD, base_ts=B.T0,
                             max_ts=B.T0)
    img = tmp_path / "image.bin"
    img.write_bytes(b"\xff" * 7 + first + bomb + kafka_batch(51, 2))
    code, out, err = run_cli("carve", img, "--deep", "--family", "kafka", "--json")
    assert code == 0, err
    rows = _rows(out)
    assert [(r["kind"], r["offset"]) for r in rows[:-1] if r["kind"] == "batch"] == [("batch", 0), ("batch", 1),
                                                                                    ("batch", 51)]
    assert [r["offset"] for r in rows if r["kind"] == "record"][-2:] == [51, 52]
    summary = rows[-1]
    assert summary["undecodable"] == {"kafka": 1}
    assert summary["first_undecodable"].startswith(f"{img}@{7 + len(first)}: "), summary


def test_kafka_inspect_offset_inside_a_batch_too_large_to_inflate(tmp_path, run_cli, monkeypatch):
    """`inspect --offset` of a record in a compressed batch that inflates past the cap said the offset was
    'within the batch's range but no record has it (compacted away?)' with target_found false: a wrong
    answer, the records were never walked. Now target_found is null and the note says they were not walked."""
    from builders import kafka_batch, kafka_builder, kafka_codec_batch
    from formats import kafka as K
    from mqtool.kafka import inspect as I

    monkeypatch.setattr(I, "INFLATE_LIMIT", 4096)
    B = kafka_builder()
    part = tmp_path / "t-0"
    part.mkdir()
    big = kafka_codec_batch(1, [B.record(0, 0, b"k", bytes(10_000))], K.CODEC_GZIP, base_ts=B.T0, max_ts=B.T0)
    (part / "00000000000000000000.log").write_bytes(kafka_batch(0, 1) + big)
    code, out, err = run_cli("inspect", part, "--offset", "1", "--json")
    rec = [r for r in _rows(out) if r["kind"] == "record"][0]
    assert rec["base_offset"] == 1 and rec["target_found"] is None, rec
    assert not any("compacted" in n for n in rec["notes"]) and any("walked here" in n for n in rec["notes"]), rec


def test_kafka_inspect_walk_of_a_huge_batch_is_bounded(tmp_path, run_cli, monkeypatch):
    """A zstd batch of 3 M seven-byte records (21 MB inflated, under the inflate cap) took minutes in
    `inspect` (every record walked with the schema): the walk stops after WALK_LIMIT records (lowered here),
    the count checks are left out rather than failed, and an offset past the walk is not known."""
    from builders import kafka_builder, kafka_codec_batch
    from formats import kafka as K
    from mqtool.kafka import inspect as I

    monkeypatch.setattr(I, "WALK_LIMIT", 50, raising=False)
    B = kafka_builder()
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(
        kafka_codec_batch(0, [B.record(i, 0, None, None) for i in range(200)], K.CODEC_ZSTD, base_ts=B.T0,
                          max_ts=B.T0))
    for target, found in ((10, True), (150, None)):
        code, out, err = run_cli("inspect", part, "--offset", target, "--json")
        rows = _rows(out)
        rec = rows[-1]
        assert (code, rec["target_found"], rec["failed"]) == (0, found, 0), (target, rec)
        assert len([r for r in rows if r["kind"] == "field" and r["path"].endswith("].offsetDelta")]) == 50


def test_max_message_size_past_32_bits_is_a_usage_error(run_cli):
    """`--max-message-size 2^64` (or 2^63) reached the compiled walkers and raised OverflowError (a traceback)
    in carve, info, report and verify; a unit's length is a signed 32-bit field, so 2^31-1 is the most."""
    store = FIXTURES / "rocketmq" / "store"
    seg = sorted((store / "commitlog").iterdir())[0]
    for args in (("carve", seg), ("info", store), ("verify", "store", store)):
        for big in (1 << 64, 1 << 63, 1 << 31):
            code, out, err = run_cli(*args, "--max-message-size", big, "--json")
            assert code == 2 and "--max-message-size" in err, (args, big, code, err)
        code, out, err = run_cli(*args, "--max-message-size", (1 << 31) - 1, "--json")
        assert code == 0, (args, err)


def test_a_bad_option_is_one_line_on_stderr(run_cli):
    """README: exit 2 is one line on stderr. Click printed four (usage, 'Try ... --help', a blank line,
    'Error: ...'). A value typed by the user is shown escaped."""
    store = FIXTURES / "rocketmq" / "store"
    for args in (("query", store, "--offset", "-1"), ("dump", "commitlog", store, "--bogus"), ("--bogus",),
                 ("dump", "nope"), ("query",), ("verify", "store", store, "--jobs", "-3"),
                 ("carve", store, "--family", "x\x1b[2J"), ("diff", store, store, store)):
        code, out, err = run_cli(*args)
        assert code == 2 and out == "", (args, code, out)
        assert err.count("\n") == 1 and err.startswith("mqtool: ") and "--help`)" in err, (args, err)
        assert "\x1b" not in err, (args, err)
    code, out, err = run_cli("dump")             # a group alone still shows its help
    assert code == 2 and "Commands:" in out + err


@pytest.mark.parametrize("native", ["1", "0"])
@pytest.mark.parametrize("queue_offset", [(1 << 63) - 1, 1 << 59, -5])
def test_rocketmq_rebuild_queue_offset_past_any_consume_queue_file(tmp_path, run_cli, monkeypatch, native,
                                                                    queue_offset):
    """QUEUEOFFSET 2^63-1 made rebuild-index overflow the compiled lane's state (a traceback) and, without the
    helpers, write a consume queue file named with 21 digits; 2^59 (unit at 2^59 * 20 > 2^63) and -5 wrote files
    named past a Java long or negative. Such a unit is skipped with a cq-offset-out-of-range warning; the next
    message of the queue, at offset 0, is rebuilt."""
    from builders import rocketmq_unit

    monkeypatch.setenv("MQTOOL_NATIVE", native)
    store = tmp_path / "store"
    (store / "commitlog").mkdir(parents=True)
    a = rocketmq_unit(phys=0, queue_offset=queue_offset)
    b = rocketmq_unit(phys=len(a), queue_offset=0)
    (store / "commitlog" / ("0" * 20)).write_bytes(a + b)
    code, out, err = run_cli("rebuild-index", store, "--out", tmp_path / "out", "--json")
    assert code in (0, 1), err
    found = [r for r in _rows(out) if r.get("code") == "cq-offset-out-of-range"]
    assert len(found) == 1 and str(queue_offset) in found[0]["message"], _rows(out)
    cq = sorted(p.name for p in (tmp_path / "out" / "consumequeue" / "T" / "0").iterdir())
    assert cq == ["0" * 20], cq


def test_export_of_a_value_past_the_parquet_column_type(tmp_path, run_cli):
    """A Kafka batch at base offset 2^63-6 claiming lastOffsetDelta 2^31-1 has a last offset past 2^63-1:
    `export` raised OverflowError from pyarrow (a traceback). The value no Parquet long holds is null; the rest
    of the row is exported."""
    pq = pytest.importorskip("pyarrow.parquet")
    from builders import kafka_builder

    BK = kafka_builder()

    part = tmp_path / "logs" / "t-0"
    part.mkdir(parents=True)
    base = (1 << 63) - 6
    (part / ("0" * 20 + ".log")).write_bytes(
        BK.batch_v2(base, [BK.record(0, 0, b"k", b"v", [])], base_ts=BK.T0, max_ts=BK.T0, last_delta=(1 << 31) - 1))
    code, out, err = run_cli("export", tmp_path / "logs", "--to", tmp_path / "out")
    assert code == 0, err
    rows = pq.read_table(tmp_path / "out").to_pylist()
    assert [(r["offset"], r["last_offset"], r["count"]) for r in rows] == [(base, None, 1)]


def test_json_files_nested_too_deep_or_not_finite(tmp_path, run_cli):
    """`query --offsets` of a deeply nested file and `info` of a Kafka log dir whose .kafka_cleanshutdown is
    4000 '[' raised RecursionError (tracebacks); a quorum-state holding NaN/Infinity came out of `dump kafka
    --json` as NaN/Infinity, which is not JSON (the NDJSON contract). Each is now a clear answer."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    nan = tmp_path / "nan.json"
    nan.write_text('{"g": {"Orders": {"0": NaN}}}')
    for f in (deep, nan):
        code, out, err = run_cli("query", FIXTURES / "rocketmq" / "store", "--unconsumed-by", "g", "--offsets", f)
        assert code == 2 and err.count("\n") == 1 and f"{f}: offsets file is not JSON" in err, (f, err)
    logs = shutil.copytree(FIXTURES / "kafka" / "logdir", tmp_path / "logs")
    (logs / ".kafka_cleanshutdown").write_text("[" * 4000)
    code, out, err = run_cli("info", logs, "--json")
    assert code in (0, 1), err
    qs = tmp_path / "qs" / "__cluster_metadata-0" / "quorum-state"
    qs.parent.mkdir(parents=True)
    qs.write_text('{"leaderId": NaN, "leaderEpoch": 1e999, "votedId": -Infinity}')
    code, out, err = run_cli("dump", "kafka", qs, "--json")
    row = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in NDJSON"))
    assert row["properties"] == {"problem": "not JSON: NaN is not JSON"}, row


def test_export_runs_under_an_address_space_limit(tmp_path):
    """Under `ulimit -v` 1.5 GB, `export` of a two-partition Kafka log dir aborted in most runs ("cannot
    allocate memory for thread-local data", exit 127): Arrow's eight I/O threads each reserve allocator
    address space. With two it runs; its memory use is far below the limit."""
    pytest.importorskip("pyarrow")
    import os
    import resource
    import subprocess
    import sys

    from conftest import ROOT

    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES / "kafka" / "logdir" / "fixture-0", logs / "a-0")
    shutil.copytree(FIXTURES / "kafka" / "logdir" / "fixture-0", logs / "b-0")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))

    for k in range(3):
        r = subprocess.run([sys.executable, "-m", "mqtool", "export", str(logs), "--to", str(tmp_path / f"o{k}")],
                           capture_output=True, text=True, preexec_fn=limit, timeout=120,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert r.returncode == 0 and "Kafka batches of 22 records" in r.stderr, (k, r.returncode, r.stderr[-600:])


def test_output_onto_a_device_or_fifo_is_written_in_place(tmp_path, run_cli):
    """`report -o /dev/null --force` renamed the report over the device node (a regular file where /dev/null
    was); then a device, FIFO or socket was refused. Now it is a stream, written in place with or without
    --force (no temporary file, no rename): the node stays what it was, a FIFO's reader gets the whole output."""
    import os
    import stat
    import threading

    store = FIXTURES / "rocketmq" / "store"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args in (("report", store, "-o", fifo), ("verify", "store", store, "--manifest", fifo, "--force")):
        got = []
        reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
        reader.start()
        code, out, err = run_cli(*args)
        if code:                        # nobody opened the FIFO for writing: end the reader's wait
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(60)
        assert code == 0 and not reader.is_alive(), (args, err)
        assert got[0].startswith(b"<!DOCTYPE html>" if args[0] == "report" else b'{"kind":"manifest_entry",'), (args, got[0][:80])
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and sorted(os.listdir(tmp_path)) == ["fifo"], args
    try:
        os.mknod(tmp_path / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        return
    for force in ((), ("--force",)):
        code, out, err = run_cli("report", store, "-o", tmp_path / "null", *force)
        assert code == 0, err
        assert stat.S_ISCHR(os.lstat(tmp_path / "null").st_mode) and os.lstat(tmp_path / "null").st_rdev == \
            os.makedev(1, 3)
