"""One named regression per defect the hostile-input campaign of session 9 (``fuzz/cli_campaign.py``) found,
plus a short run of the campaign itself (the driver's judge can fail)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT


def _rows(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _copy(tmp_path: Path, family_dir: str) -> Path:
    dst = tmp_path / "store"
    shutil.copytree(FIXTURES / family_dir, dst)
    return dst


@pytest.mark.parametrize("how", ["dir", "fifo", "loop"])
@pytest.mark.parametrize("part", ["consumequeue", "index"])
def test_rocketmq_verify_part_reports_a_segment_it_cannot_read(tmp_path, run_cli, part, how):
    """`verify consumequeue` / `verify index` run no commitlog pass; the queue and index checks skip entries
    that point into a segment that cannot be read ("reported by the commitlog checks"), so a store whose first
    segment was a directory, a FIFO or a symlink loop was "sound", exit 0, with every entry into it unchecked."""
    store = _copy(tmp_path, "rocketmq/store")
    seg = sorted((store / "commitlog").iterdir())[0]
    seg.unlink()
    if how == "dir":
        seg.mkdir()
    elif how == "fifo":
        os.mkfifo(seg)
    else:
        seg.symlink_to(seg.name)
    code, out, err = run_cli("verify", part, store, "--json")
    assert code == 1, (out, err)
    found = [r for r in _rows(out) if r["kind"] == "finding" and r["code"] == "file-unreadable"]
    assert [Path(r["file"]).name for r in found] == [seg.name], out
    assert _rows(out)[-1]["verdict"] != "sound"


def test_campaign_driver_judges_and_runs(tmp_path):
    """The campaign's judge fails what breaks the promise, and a small slice of the campaign runs clean."""
    sys.path.insert(0, str(ROOT))
    from fuzz import cli_campaign as C

    assert C.judge(0, "", False, None) is None and C.judge(1, "", False, None) is None
    assert C.judge(2, "mqtool: x: not a store\n", False, None) is None
    assert C.judge(2, "mqtool: a\nmqtool: b\n", False, None)
    assert C.judge(1, "Traceback (most recent call last):\n  ...\nMemoryError\n", False, None)
    assert C.judge(137, "", False, None) and C.judge(-11, "", False, None)
    p = subprocess.run([sys.executable, str(ROOT / "fuzz" / "cli_campaign.py"), "--family", "kafka", "--classes",
                        "path", "--verbs", "info,hash"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "| info | kafka | path |" in p.stdout and " 0 failures" in p.stdout


def _litemq_first_segment_a_directory(tmp_path: Path) -> tuple[Path, Path]:
    store = _copy(tmp_path, "litemq/store")
    seg = sorted((store / "commitlog").iterdir())[0]
    seg.unlink()
    seg.mkdir()
    return store, seg


def test_litemq_info_counts_a_segment_it_cannot_read(tmp_path, run_cli):
    """A LiteMQ commitlog file replaced by a directory: verify and dump report file-unreadable, but info
    dropped the damage (it has no byte range) and exited 0 with a clean timeline."""
    store, seg = _litemq_first_segment_a_directory(tmp_path)
    code, out, err = run_cli("info", store, "--json")
    assert code == 1, (out[-500:], err)
    damage = json.loads(out)["damage"]
    assert [(d["code"], Path(d["file"]).name) for d in damage] == [("file-unreadable", seg.name)]


def test_litemq_export_counts_a_segment_it_cannot_read(tmp_path, run_cli):
    """The same store exported: the ranges never list the unreadable file, so export said nothing and exited
    0; the first range now gives the file-list errors (as dump's walk does) and export exits 1."""
    pytest.importorskip("pyarrow")
    store, seg = _litemq_first_segment_a_directory(tmp_path)
    code, out, err = run_cli("export", store, "--to", tmp_path / "x.parquet", "--jobs", "1")
    assert code == 1, (out, err)
    assert "1 damaged range" in err


def test_kafka_checkpoint_listing_many_partitions_is_bounded_findings(tmp_path, run_cli):
    """A log-start-offset-checkpoint of a million lines naming one partition with no directory (6 MB) gave a
    million findings: `verify store --as table` ran past a minute. Kafka reads the lines into a map (the last
    line of a partition wins); the partitions with no directory are now one finding per file, and repeated
    lines one checkpoint-malformed finding."""
    store = _copy(tmp_path, "kafka/logdir")
    lines = ["ghost 0 1"] * 1000 + [f"t{i} 0 5" for i in range(1000)] + ["fixture 0 0"]
    ck = store / "log-start-offset-checkpoint"
    ck.write_text(f"0\n{len(lines)}\n" + "".join(ln + "\n" for ln in lines))
    code, out, err = run_cli("verify", "store", store, "--json")
    assert code == 1, err
    mine = [r for r in _rows(out) if r["kind"] == "finding" and r["file"] and r["file"].endswith(ck.name)]
    assert sorted(r["code"] for r in mine) == ["kafka.checkpoint-malformed", "kafka.checkpoint-unknown-partition"]
    unknown = next(r for r in mine if r["code"] == "kafka.checkpoint-unknown-partition")
    assert unknown["actual"] == 1001 and "ghost-0" in unknown["message"]
    malformed = next(r for r in mine if r["code"] == "kafka.checkpoint-malformed")
    assert malformed["message"].startswith("999 line(s) repeat")


def _kafka_second_segment_a_fifo(tmp_path: Path) -> tuple[Path, Path]:
    store = _copy(tmp_path, "kafka/logdir")
    seg = sorted((store / "fixture-0").glob("*.log"))[1]
    seg.unlink()
    os.mkfifo(seg)
    return store, seg


@pytest.mark.parametrize("verb", ["info", "report", "query-time", "query-key", "query-pid"])
def test_kafka_reading_verbs_go_on_past_a_segment_they_cannot_open(tmp_path, run_cli, verb):
    """A Kafka .log replaced by a FIFO: verify and dump report file-unreadable and go on; info (so report) and
    query stopped with exit 2 and 'not a regular file (FIFO)', losing everything else (query after printing
    part of its rows). Now: damage, exit 1, the other segment's records still there."""
    store, seg = _kafka_second_segment_a_fifo(tmp_path)
    args = {"info": ["info", store, "--json"], "report": ["report", store, "-o", tmp_path / "r.html"],
            "query-time": ["query", store, "--time-from", "2000-01-01T00:00:00Z", "--json"],
            "query-key": ["query", store, "--key", "k3", "--json"],
            "query-pid": ["query", store, "--producer-id", "7000", "--json"]}[verb]
    code, out, err = run_cli(*args)
    assert code == 1, (out[-300:], err)
    if verb == "info":
        doc = json.loads(out)
        assert [(d["code"], Path(d["file"]).name) for d in doc["damage"]] == [("file-unreadable", seg.name)]
        assert doc["messages"] > 0
    elif verb.startswith("query"):
        assert _rows(out) and f"{seg.name}: file-unreadable" in err


@pytest.mark.parametrize("query", [["--time-from", "2000-01-01T00:00:00Z"], ["--key", "order-0"],
                                   ["--topic", "Orders", "--queue", "0", "--queue-offset", "1"]])
def test_rocketmq_query_goes_on_past_a_segment_it_cannot_open(tmp_path, run_cli, query):
    """RocketMQ query over a store whose first segment is a directory: the single-unit reader let the
    'not a regular file' error through (exit 2, nothing else read) where the scanner and verify report
    file-unreadable; now it is damage (exit 1) and the time query still prints the other segments' messages."""
    store = _copy(tmp_path, "rocketmq/store")
    seg = sorted((store / "commitlog").iterdir())[0]
    seg.unlink()
    seg.mkdir()
    code, out, err = run_cli("query", store, *query, "--json")
    assert code == 1, (out[-300:], err)
    assert "file-unreadable" in err and seg.name in err
    if query[0] == "--time-from":
        assert _rows(out) and all(not r["file"].endswith(seg.name) for r in _rows(out))


def _kafka_partition_with_a_name_not_utf8(tmp_path: Path) -> tuple[Path, bytes]:
    store = _copy(tmp_path, "kafka/logdir")
    bad = b"\xff\xfe\x1b[2Jfixture-0"
    os.rename(store / "fixture-0", os.fsencode(store) + b"/" + bad)
    return store, bad


def test_kafka_report_of_a_partition_directory_named_not_utf8(tmp_path, run_cli):
    """A partition directory whose name is not UTF-8 (and holds an ESC): `report` stopped with exit 2
    "'utf-8' codec can't encode characters ... surrogates not allowed" writing the page. Now the page shows the
    name with its bytes escaped (\\xff, \\x1b) as a terminal would, and no raw control."""
    store, _ = _kafka_partition_with_a_name_not_utf8(tmp_path)
    out_html = tmp_path / "r.html"
    code, out, err = run_cli("report", store, "-o", out_html)
    assert code in (0, 1), err
    page = out_html.read_bytes().decode("utf-8")        # valid UTF-8
    assert "\\xff\\xfe\\x1b[2Jfixture-0" in page and "\x1b" not in page


def test_kafka_export_of_a_partition_directory_named_not_utf8(tmp_path, run_cli):
    """The same store exported: the Parquet writer refused the name (exit 2, nothing written). Now the
    string columns carry its bytes as \\xNN text, the topic partition is named by a hash and listed in
    _partitions.ndjson with its true value (as a too-long name is)."""
    pq = pytest.importorskip("pyarrow.parquet")
    store, bad = _kafka_partition_with_a_name_not_utf8(tmp_path)
    dest = tmp_path / "x.parquet"
    code, out, err = run_cli("export", store, "--to", dest, "--jobs", "1")
    assert code == 0, err
    t = pq.read_table(dest)
    code, _, err = run_cli("export", FIXTURES / "kafka" / "logdir", "--to", tmp_path / "plain.parquet", "--jobs", "1")
    assert code == 0, err
    assert t.num_rows == pq.read_table(tmp_path / "plain.parquet").num_rows     # renaming loses no row
    assert all(f.startswith(str(store) + "/\\xff\\xfe\x1b[2Jfixture-0/") for f in t.column("file").to_pylist())
    index = _rows((dest / "_partitions.ndjson").read_text())
    assert [os.fsencode(r["value"]) for r in index] == [bad[:-2]]     # the topic: the name less "-0"


@pytest.mark.parametrize("name", ["00000000000000000009.txnindex", "00000000000000000009.timeindex",
                                  "00000000000000000012.snapshot", "leader-epoch-checkpoint"])
def test_kafka_small_file_of_a_hostile_size_costs_bounded_memory(tmp_path, name):
    """A Kafka index, snapshot or checkpoint grown (sparse, no disk used) to 1.5 GB: the readers read it whole
    and kept every entry, and `verify store` died of MemoryError under a 2 GB address-space limit (exit 120
    or 1 with 'lost sys.stderr', no finding). Now a file far past what Kafka writes is a file-unreadable finding;
    but a .timeindex (like an .index) is preallocated by Kafka to segment.index.bytes, any size up to 2 GiB, and
    zero after its entries: read up to them, its zero tail checked unread (a hole), it is a preallocated index."""
    import resource

    store = _copy(tmp_path, "kafka/logdir")
    victim = store / "fixture-0" / name
    with open(victim, "r+b") as f:
        f.truncate(1_500_000_000)

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2_000_000_000, 2_000_000_000))

    r = subprocess.run([sys.executable, "-m", "mqtool", "verify", "store", str(store), "--json"], capture_output=True,
                       text=True, preexec_fn=limit, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert "Traceback" not in r.stderr and "MemoryError" not in r.stderr, r.stderr[-600:]
    found = [x for x in _rows(r.stdout) if x["kind"] == "finding" and x["code"] == "kafka.file-unreadable"]
    if name.endswith(".timeindex"):
        assert r.returncode == 0 and found == [], r.stdout[-600:]
        pre = [x for x in _rows(r.stdout) if x["kind"] == "finding" and x["code"] == "kafka.timeindex-preallocated"]
        assert [Path(x["file"]).name for x in pre] == [name], r.stdout[-600:]
        return
    assert r.returncode == 1, r.stderr[-600:]
    assert [Path(x["file"]).name for x in found] == [name], r.stdout[-600:]


@pytest.mark.parametrize("victim", ["segment", "consumequeue", "index"])
def test_rocketmq_rebuild_goes_on_past_a_file_it_cannot_open(tmp_path, run_cli, victim):
    """RocketMQ `rebuild-index` (--out and --compare) over a store where a commitlog segment, a consume queue
    file or an index file is a FIFO: exit 2 'not a regular file (FIFO)', nothing rebuilt or compared. Now the
    segment is commitlog damage (its messages are not dispatched; --out still writes the rest) and a store
    file --compare cannot read is a file-unreadable finding."""
    store = _copy(tmp_path, "rocketmq/store")
    f = {"segment": lambda: sorted((store / "commitlog").iterdir())[0],
         "consumequeue": lambda: store / "consumequeue" / "Orders" / "0" / "00000000000000000000",
         "index": lambda: sorted((store / "index").iterdir())[0]}[victim]()
    f.unlink()
    os.mkfifo(f)
    code, out, err = run_cli("rebuild-index", store, "--out", tmp_path / "rb", "--json")
    assert code in (0, 1) and "Traceback" not in err, err
    if victim == "segment":
        assert any(r.get("code") == "commitlog-damage" and r["file"].endswith(f.name) and "file-unreadable"
                   in r["message"] for r in _rows(out)), out
        assert (tmp_path / "rb" / "consumequeue").is_dir()
    code, out, err = run_cli("rebuild-index", store, "--compare", "--json")
    assert code == 1, err
    codes = {(r["code"], Path(r["file"] or "").name) for r in _rows(out) if r["kind"] == "finding"}
    want = ("commitlog-damage", f.name) if victim == "segment" else ("file-unreadable", f.name)
    assert want in codes, codes
