"""Issue #15: every verb learns a store's sizes from the store itself, with no option given.

Stores of random geometries are built by tests/builders.py (construct schemas, the brokers' rules)
and read by verify, query, dump, info and rebuild-index; each must agree with what the builder used, and the
rebuild must be byte-identical to the built files. Plus the real-data regressions of the issue.
"""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from conftest import require_realdata
from builders import kafka_geometry_partition as kafka_partition, litemq_builder
from builders import rocketmq_geometry_store as rocketmq_store

PRIMES = [2, 3, 7, 13, 31, 97, 101, 389, 1009, 7919, 65537, 99991]


def _geometries(n: int = 22, seed: int = 1515):
    """(slots, entries, cq units per file, keys, files wanted): 1 ≤ slots ≤ 100,000 and 2 ≤ entries ≤ 100,000
    (log-uniform, primes among them), index files full and partly filled, one or several of them."""
    rng = random.Random(seed)
    out = [(1, 2, 1, 5, "full"), (100_000, 100_000, 300, 700, "partial"), (99991, 7, 7, 60, "full"),
           (3, 65537, 13, 400, "partial")]
    while len(out) < n:
        slots = rng.choice(PRIMES) if rng.random() < 0.4 else int(10 ** rng.uniform(0, 5))
        entries = rng.choice(PRIMES) if rng.random() < 0.4 else max(2, int(10 ** rng.uniform(0.3, 5)))
        files = rng.choice((1, 2, 3, 4))
        per = entries - 1
        if per * (files - 1) > 2500:
            files = 1 + 2500 // max(per, 1)
        last = rng.choice(("full", "partial"))
        keys = per * (files - 1) + (per if last == "full" else rng.randint(1, per))
        if keys > 2500:
            keys, last = rng.randint(3, 2500), "partial"
        out.append((min(max(slots, 1), 100_000), min(entries, 100_000), rng.randint(1, 50), keys, last))
    return out


def _jsonl(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("slots,entries,units,keys,last", _geometries())
def test_rocketmq_geometry_sweep(slots, entries, units, keys, last, tmp_path, run_cli):
    root = tmp_path / "store"
    built = rocketmq_store(root, slots, entries, units * 20, keys, seed=slots * 7 + entries)
    n_index = sum(1 for r in built["files"] if r.startswith("index/"))
    assert n_index == -(-keys // (entries - 1))                       # the builder made what was asked

    code, out, err = run_cli("verify", "store", root, "--json")
    rows = _jsonl(out)
    summary = rows[-1]
    assert code == 0, [r for r in rows if r.get("severity") == "error"][:3]
    assert not [r for r in rows if r.get("code") in ("index-geometry", "cq-geometry")]
    assert (summary["index_geometry"]["max_hash_slots"], summary["index_geometry"]["max_index_num"]) == (slots, entries)
    assert summary["index_geometry"]["from"] == "store" and summary["cq_file_size"]["bytes"] == units * 20

    code, out, err = run_cli("dump", "index", root, "--json")
    rows = _jsonl(out)
    heads = [r for r in rows if r["kind"] == "index_header"]
    assert code == 0 and len(heads) == n_index
    assert {(r["hash_slot_num"], r["index_num"], r["geometry_from"]) for r in heads} == {(slots, entries, "store")}
    assert sum(1 for r in rows if r["kind"] == "index_entry") == keys

    code, out, err = run_cli("info", root, "--json")
    geo = json.loads(out)["geometry"]
    assert code == 0 and geo["index geometry"]["max_hash_slots"] == slots
    assert geo["index geometry"]["max_index_num"] == entries and geo["consumequeue file size"]["bytes"] == units * 20

    rng = random.Random(slots)
    for topic, key, offset in [built["keys"][0], built["keys"][-1], rng.choice(built["keys"])]:
        flag = "--unique-key" if key.startswith("0A0000") else "--key"
        code, out, err = run_cli("query", root, flag, key, "--topic", topic, "--json")
        rows = _jsonl(out)
        assert code == 0, err
        assert [(r["offset"], r["via"]) for r in rows] == [(offset, "index")]

    code, out, err = run_cli("rebuild-index", root, "--out", tmp_path / "out", "--json")
    summary = _jsonl(out)[-1]
    assert code == 0 and summary["settings_from"]["maxHashSlotNum"] == "store"
    rebuilt = {p.relative_to(tmp_path / "out").as_posix(): p.read_bytes()
               for p in sorted((tmp_path / "out").rglob("*")) if p.is_file()}
    assert rebuilt == {k: v for k, v in built["files"].items() if not k.startswith("commitlog/")}


def test_unknown_geometry_is_a_warning_with_candidates_and_query_scans(tmp_path, run_cli):
    """An index file with no entries cannot tell its geometry: a warning naming candidates, never an error,
    and a key query answers by scanning (with one note) instead of "not found"."""
    root = tmp_path / "store"
    built = rocketmq_store(root, 13, 50, 100, 20, seed=3)
    (idx,) = (root / "index").iterdir()
    idx.write_bytes(bytes(40 + 4 * 13 + 20 * 50))                      # wiped: header and entries zero
    code, out, err = run_cli("verify", "index", root, "--json")
    geo = [r for r in _jsonl(out) if r.get("code") == "index-geometry"]
    assert len(geo) == 1 and geo[0]["severity"] == "warning" and "e.g." in geo[0]["message"]
    topic, key, offset = next(k for k in built["keys"] if not k[1].startswith("0A0000"))
    code, out, err = run_cli("query", root, "--key", key, "--topic", topic, "--json")
    assert code == 0 and [(r["offset"], r["via"]) for r in _jsonl(out)] == [(offset, "scan")]
    assert "full commitlog scan" in err and "damaged" not in err
    # the user can settle it
    code, out, err = run_cli("verify", "index", root, "--json", "--max-hash-slots", "13")
    assert _jsonl(out)[-1]["index_geometry"] == {"max_hash_slots": 13, "max_index_num": 50, "from": "option",
                                                 "evidence": "option (the other count from the file size)"}


def test_index_behind_the_log_is_completed_by_a_scan(tmp_path, run_cli):
    """Messages after the last indexed one (a crash before the index caught up) are found by a scan."""
    root = tmp_path / "store"
    built = rocketmq_store(root, 31, 60, 100, 300, seed=4)
    idx = sorted((root / "index").iterdir())
    for p in idx[1:]:
        p.unlink()
    topic, key, offset = built["keys"][-1]
    code, out, err = run_cli("query", root, "--key" if not key.startswith("0A0000") else "--unique-key", key,
                             "--topic", topic, "--json")
    assert code == 0 and [(r["offset"], r["via"]) for r in _jsonl(out)] == [(offset, "scan")]
    assert "not covered by the index files" in err


@pytest.mark.parametrize("units", [1, 2, 5, 16, 33])
def test_litemq_cq_file_size_sweep(units, tmp_path, run_cli, monkeypatch):
    mod = litemq_builder()
    monkeypatch.setattr(mod, "CQ_SIZE", 24 * units)         # the builder module is shared: put it back after
    out = mod.main(str(tmp_path / "lm"))
    store = out / "store"
    code, stdout, err = run_cli("rebuild-index", store, "--compare", "--json")
    summary = _jsonl(stdout)[-1]
    assert code == 0, err
    assert summary["cq_file_size"] == 24 * units and summary["cq_file_size_from"] == "store"
    assert summary["cq_files_differ"] == 0
    code, stdout, _ = run_cli("info", store, "--json")
    assert json.loads(stdout)["geometry"]["consumequeue file size"]["bytes"] == 24 * units
    code, stdout, _ = run_cli("verify", "store", store, "--json")
    assert _jsonl(stdout)[-1]["cq_file_size"] == {"bytes": 24 * units, "from": "store",
                                                 "evidence": _jsonl(stdout)[-1]["cq_file_size"]["evidence"]}


@pytest.mark.parametrize("interval", [0, 1, 57, 300, 997, 4096, 5003, 65536])
def test_kafka_index_interval_sweep(interval, tmp_path, run_cli):
    part = tmp_path / "logs" / "sweep-0"
    built = kafka_partition(part, interval, seed=interval + 11)
    code, stdout, err = run_cli("rebuild-index", tmp_path / "logs", "--out", tmp_path / "out", "--json")
    assert code == 0, err
    assert _jsonl(stdout), "rebuild-index --json wrote no rows"
    got = {p.name: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert got == built
    code, stdout, _ = run_cli("verify", "store", tmp_path / "logs", "--json")
    rows = _jsonl(stdout)
    assert not [r for r in rows if "index" in r.get("code", "") and r["severity"] != "info"]
    decided = rows[-1]["index_interval_bytes"]["sweep-0"]
    assert decided["from"] in ("store", "default")
    if any(built[n] for n in built if n.endswith(".index")):
        assert decided["from"] == "store"
    code, stdout, _ = run_cli("info", tmp_path / "logs", "--json")
    assert json.loads(stdout)["geometry"]["index.interval.bytes"]


# ---- the real stores of the issue -------------------------------------------------------------------------

def test_litemq_clean_rebuild_takes_the_stores_cq_size(tmp_path, run_cli):
    store = require_realdata("litemq", "clean", "data", "broker")
    code, stdout, err = run_cli("rebuild-index", store, "--out", tmp_path / "out", "--compare", "--json")
    summary = _jsonl(stdout)[-1]
    assert code == 0, err
    sizes = {p.stat().st_size for p in (tmp_path / "out" / "consumequeue").rglob("*") if p.is_file()}
    assert sizes == {384}                      # MANIFEST.md: ConsumeQueue.FileSize = 384
    assert summary["cq_files_differ"] == 0 and summary["cq_file_size_from"] == "store"


def test_kafka_broker_append_rebuild_equals_recovered(tmp_path, run_cli):
    """MANIFEST.md: broker-append was written with index.interval.bytes=300; recovered/ is LogSegment.recover's
    rebuild of the same logs. Without options the rebuild reproduces recovered/ byte for byte."""
    gen = require_realdata("kafka", "generated-4.0.0-SNAPSHOT")
    code, stdout, err = run_cli("rebuild-index", gen / "broker-append", "--out", tmp_path / "out", "--json")
    assert code == 0, err
    rebuilt = {p.name: p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    want = {p.name: p.read_bytes() for p in (gen / "recovered" / "forensics-0").iterdir()
            if p.suffix in (".index", ".timeindex", ".txnindex")}
    assert len(want) == 10 and rebuilt == want
    decided = _jsonl(stdout)[-1]["index_interval_bytes"]["forensics-0"]
    assert decided["bytes"] == 300 and decided["from"] == "store"
    code, stdout, _ = run_cli("rebuild-index", gen / "recovered", "--compare", "--json")
    assert code == 0 and _jsonl(stdout)[-1]["identical"] == 10


def test_no_constant_tuned_to_the_test_stores():
    """The 100/400 fallback and the slots = entries/4 guess are gone (issue #15)."""
    src = (Path(__file__).resolve().parent.parent / "mqtool" / "rocketmq" / "indexfiles.py").read_text()
    assert "infer_index_geometry" not in src and "(100, 400)" not in src and "// 84" not in src


@pytest.mark.parametrize("cmd", [["verify", "store"], ["verify", "index"], ["query"], ["dump", "index"],
                                 ["dump", "consumequeue"], ["dump", "kafka"], ["info"], ["report"],
                                 ["rebuild-index"], ["export"]])
def test_size_options_on_every_verb_that_reads_those_files(cmd, run_cli):
    code, out, _ = run_cli(*cmd, "--help")
    assert code == 0
    for opt in ("--broker-conf", "--cq-file-size", "--max-hash-slots", "--max-index-num", "--index-interval-bytes"):
        assert opt in out, (cmd, opt)


def test_broker_conf_decides_for_every_verb(tmp_path, run_cli):
    """--broker-conf values win over the store (and are named as the source); a Kafka server.properties too."""
    root = tmp_path / "store"
    rocketmq_store(root, 13, 50, 100, 120, seed=5)
    conf = tmp_path / "broker.conf"
    conf.write_text("maxHashSlotNum=13\nmaxIndexNum = 50\nmappedFileSizeConsumeQueue=100\n")
    code, out, _ = run_cli("verify", "store", root, "--json", "--broker-conf", conf)
    s = _jsonl(out)[-1]
    assert s["index_geometry"]["from"] == "broker-conf" and s["cq_file_size"]["from"] == "broker-conf"
    code, out, _ = run_cli("info", root, "--json", "--broker-conf", conf)
    assert json.loads(out)["geometry"]["index geometry"]["from"] == "broker-conf"
    # a stated geometry that does not fit the files is a warning, and the files decide
    conf.write_text("maxHashSlotNum=7\nmaxIndexNum=7\n")
    code, out, _ = run_cli("verify", "index", root, "--json", "--broker-conf", conf)
    rows = _jsonl(out)
    assert [r["severity"] for r in rows if r.get("code") == "index-geometry"] == ["warning"]
    assert rows[-1]["index_geometry"]["from"] == "store" and rows[-1]["index_geometry"]["max_hash_slots"] == 13

    part = tmp_path / "logs" / "conf-0"
    kafka_partition(part, 700, seed=9)
    props = tmp_path / "server.properties"
    props.write_text("broker.id=0\nlog.index.interval.bytes=700\n")
    code, out, _ = run_cli("verify", "store", tmp_path / "logs", "--json", "--broker-conf", props)
    assert _jsonl(out)[-1]["index_interval_bytes"]["conf-0"] == {
        "bytes": 700, "from": "broker-conf", "evidence": f"log.index.interval.bytes in {props}"}


def test_rebuild_of_an_unknown_geometry_keeps_the_files_size(tmp_path, run_cli):
    """Index files that cannot tell their split: the rebuild writes files of their size (not the broker's
    420 MB default), says it guessed, and warns with the candidates."""
    root = tmp_path / "store"
    rocketmq_store(root, 13, 50, 100, 20, seed=6)
    (idx,) = (root / "index").iterdir()
    size = 40 + 4 * 13 + 20 * 50
    idx.write_bytes(bytes(size))
    code, out, _ = run_cli("rebuild-index", root, "--out", tmp_path / "out", "--json")
    rows = _jsonl(out)
    assert code == 0 and rows[-1]["settings_from"]["maxHashSlotNum"] == "guess"
    assert [r["severity"] for r in rows if r.get("code") == "index-geometry"] == ["warning"]
    assert {p.stat().st_size for p in (tmp_path / "out" / "index").iterdir()} == {size}


def test_litemq_cq_file_size_option_is_obeyed_when_reading(run_cli):
    """--cq-file-size says how the store is shaped: dump consumequeue numbers entries with it (file index x
    entries per file), where the store's own 384-byte files give 16 entries per file."""
    import json

    from conftest import require_realdata

    store = require_realdata("litemq", "clean", "data", "broker")
    args = ("dump", "consumequeue", store, "--topic", "orders.v1", "--queue", "0", "--json")

    def first_of_file(extra):
        code, out, err = run_cli(*args, *extra)
        assert code in (0, 1), err
        rows = [json.loads(x) for x in out.splitlines()]
        return {r["file"].rsplit("/", 1)[1]: r["queue_offset"] for r in reversed(rows)}

    assert first_of_file(())["00000000000000000001"] == 384 // 24          # from the store's files
    assert first_of_file(("--cq-file-size", "768"))["00000000000000000001"] == 768 // 24
