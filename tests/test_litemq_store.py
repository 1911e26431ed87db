"""LiteMQ recognition: every LiteMQ part is recognised, nothing else under realdata is."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import require_realdata
from mqtool.detect import detect
from mqtool.litemq import store


def _paths(top: Path, max_depth: int = 4, max_files_per_dir: int = 40):
    yield top
    for dirpath, dirnames, filenames in os.walk(top):
        depth = Path(dirpath).relative_to(top).parts
        if len(depth) >= max_depth:
            dirnames[:] = []
        dirnames.sort()
        yield Path(dirpath)
        for f in sorted(filenames)[:max_files_per_dir]:
            yield Path(dirpath) / f


def test_other_families_never_look_like_litemq():
    for fam in ("rocketmq", "kafka"):
        top = require_realdata(fam)
        seen = 0
        for p in _paths(top):
            assert store.sniff(p) == 0, p
            seen += 1
        assert seen > 20


def test_litemq_parts_recognised():
    top = require_realdata("litemq")
    for ds in ("clean", "crash"):
        root = top / ds / "data" / "broker"
        for p in [root, root / "commitlog", root / "commitlog" / "00000000000000000002",
                  root / "consumequeue", root / "consumequeue" / "orders.v1",
                  root / "consumequeue" / "orders.v1" / "0",
                  root / "consumequeue" / "orders.v1" / "0" / "00000000000000000001"]:
            assert store.sniff(p) > 0, p
            assert detect(p) == "litemq"
    assert store.sniff(top / "clean" / "data" / "broker" / "checkpoint" / "checkpoint") == 100
    assert store.sniff(top / "crash" / "data" / "broker" / "abort" / "abort") > 0
    assert store.sniff(top / "clean" / "extras" / "index-20261122091857.gz") > 0


def test_resolve_kinds():
    root = require_realdata("litemq", "clean", "data", "broker")
    assert store.resolve(root).kind == "root"
    assert store.resolve(root / "commitlog").kind == "commitlog"
    assert store.resolve(root / "commitlog" / "00000000000000000000").kind == "segment"
    assert store.resolve(root / "consumequeue" / "payments-eu").kind == "cq_topic"
    assert store.resolve(root / "consumequeue" / "payments-eu" / "1").kind == "cq_queue"
    assert store.resolve(root / "checkpoint" / "checkpoint").kind == "checkpoint"


def test_dot_log_names_and_rocketmq_magic(tmp_path):
    src = require_realdata("litemq", "clean", "data", "broker", "commitlog")
    d = tmp_path / "broker"
    (d / "commitlog").mkdir(parents=True)
    (d / "checkpoint").mkdir()
    for i, f in enumerate(sorted(src.iterdir())):
        shutil.copyfile(f, d / "commitlog" / f"{i:020d}.log")
    assert store.sniff(d) == 100
    segs, fs = store.commitlog_segments(store.resolve(d))
    assert [s.base for s in segs] == [0, 131072, 262144, 393216] and fs == 131072
    # same layout but a RocketMQ record magic at +4: not LiteMQ
    r = tmp_path / "rmq"
    (r / "commitlog").mkdir(parents=True)
    (r / "commitlog" / "00000000000000000000").write_bytes(b"\x00\x00\x00\x40\xda\xa3\x20\xa7" + bytes(56))
    (r / "checkpoint").write_bytes(bytes(4096))
    assert store.sniff(r) == 0
    assert store.sniff(r / "commitlog" / "00000000000000000000") == 0


def test_every_path_of_the_real_litemq_stores_detects_as_litemq():
    """With every family's sniffer that this build has, no path under a LiteMQ data dir is misread."""
    top = require_realdata("litemq")
    n = 0
    for ds in ("clean", "crash"):
        root = top / ds / "data" / "broker"
        for p in [root, *sorted(root.rglob("*"))]:
            if p.is_dir() and not any(p.iterdir()):
                continue  # empty abort/ or index/ directory: nothing to read
            assert detect(p) == "litemq", p
            n += 1
    assert n > 40


def test_a_store_with_no_commitlog_file_dumps_nothing_without_damage(tmp_path, run_cli):
    """A LiteMQ data directory whose commitlog/ holds no file although its queues hold entries: `dump
    commitlog` said "1 damaged range skipped" and exited 1, though nothing was skipped; now it prints nothing
    and exits 0 (verify warns commitlog-empty: the queues point at messages that are not there)."""
    import json

    from conftest import FIXTURES

    root = tmp_path / "lm"
    shutil.copytree(FIXTURES / "litemq" / "store", root)
    for f in (root / "commitlog").iterdir():
        f.unlink()
    assert detect(root) == "litemq"
    code, out, err = run_cli("dump", "commitlog", root, "--json")
    assert (code, out) == (0, "") and "damaged" not in err, err
    code, out, err = run_cli("verify", "store", root, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert [r["severity"] for r in rows if r.get("code") == "commitlog-empty"] == ["warning"], out


def _bare_litemq(tmp_path, queue_entry: bool = False, index_bytes: bool = False, commitlog: bool = True) -> Path:
    """A LiteMQ data directory as the broker's constructor leaves it (reference/litemq.md section 1: commitlog/,
    checkpoint/, index/ and abort/ made at construction; consumequeue/ only with the first entry), optionally
    with one consume-queue entry (built by ``CQEntry``) or an index file holding bytes."""
    from formats import litemq as F

    root = tmp_path / "broker"
    for d in ("commitlog", "checkpoint", "index", "abort") if commitlog else ("checkpoint", "index", "abort"):
        (root / d).mkdir(parents=True)
    if queue_entry:
        q = root / "consumequeue" / "T" / "0"
        q.mkdir(parents=True)
        (q / ("0" * 20)).write_bytes(F.CQEntry.build(dict(CommitLogOffset=0, Size=100, TagHash=0, Timestamp=0)))
    if index_bytes:
        (root / "index" / "20260101000000").write_bytes(F.INDEX_MAGIC.to_bytes(4, "big") + bytes(36))
    return root


@pytest.mark.parametrize("what,severity", [
    ({}, "info"), ({"queue_entry": True}, "warning"), ({"index_bytes": True}, "warning")],
    ids=["fresh", "queue-entry", "index-file"])
def test_an_empty_commitlog_is_info_only_in_a_fresh_store(tmp_path, run_cli, what, severity):
    """An empty commitlog/ is what a fresh broker leaves (nothing written yet: no queue or index byte either):
    info ``commitlog-empty``, as RocketMQ says it; with a queue or index file holding bytes, messages were
    written and their files are gone: a warning. Neither is a damaged range (dump exits 0)."""
    import json

    root = _bare_litemq(tmp_path, **what)
    assert detect(root) == "litemq"
    code, out, err = run_cli("verify", "store", root, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    empty = [r for r in rows if r.get("code") == "commitlog-empty"]
    assert [(r["severity"], r["file"]) for r in empty] == [(severity, "commitlog")], out
    assert ("nothing written yet" in empty[0]["message"]) == (severity == "info")
    assert not any(r.get("code") == "no-commitlog" for r in rows)
    if severity == "info":
        assert code == 0 and rows[-1]["errors"] == 0, out
    code, out, err = run_cli("dump", "commitlog", root)
    assert (code, out) == (0, "") and "damaged" not in err, err
    assert ("commitlog-empty" in err) == (severity == "warning"), err     # a warning is a note; info: silence



@pytest.mark.parametrize("what,severity", [
    ({}, "info"), ({"preallocated": True}, "info"), ({"queue_entry": True}, "warning"),
    ({"index_bytes": True}, "warning"), ({"record": True}, "warning")],
    ids=["fresh", "fresh-preallocated", "queue-entry", "index-file", "record"])
def test_checkpoint_missing_is_info_only_before_anything_is_written(tmp_path, run_cli, what, severity):
    """No checkpoint and no abort file: only a shutdown writes the checkpoint and Start makes the abort file
    (reference/litemq.md §5, §7), so a store with nothing written yet (no record, no queue or index byte) is a
    broker that has not started: ``checkpoint-missing`` is info and the store is sound, as RocketMQ says of a
    fresh store. Once something was written, a missing checkpoint without an abort file is a warning."""
    import json
    import struct

    from conftest import FIXTURES

    preallocated, record = what.pop("preallocated", False), what.pop("record", False)
    root = _bare_litemq(tmp_path, **what)
    if preallocated or record:
        with open(root / "commitlog" / ("0" * 20), "wb") as f:
            if record:      # the fixture's first record, taken as bytes: [u32 len][encoded message]
                data = (FIXTURES / "litemq" / "store" / "commitlog" / ("0" * 20)).read_bytes()
                f.write(data[:4 + struct.unpack_from(">I", data)[0]])
            f.truncate(1 << 16)
    assert not (root / "checkpoint" / "checkpoint").exists() and not (root / "abort" / "abort").exists()
    code, out, err = run_cli("verify", "store", root, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert [r["severity"] for r in rows if r.get("code") == "checkpoint-missing"] == [severity], out
    if severity == "info":
        assert code == 0 and rows[-1]["verdict"] == "sound", out
        assert "Shutdown" not in next(r["message"] for r in rows if r.get("code") == "no-abort-file")
    else:
        assert rows[-1]["warnings"] >= 1 and rows[-1]["messages"] == int(record), out


def test_no_commitlog_directory_is_still_no_commitlog(tmp_path, run_cli):
    """A data directory without commitlog/ at all (it is gone, or was never copied; a consumequeue/ next to
    checkpoint/ still makes it a LiteMQ data directory): ``no-commitlog``, a warning."""
    import json

    root = _bare_litemq(tmp_path, queue_entry=True, commitlog=False)
    assert detect(root) == "litemq"
    code, out, err = run_cli("verify", "store", root, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert [r["severity"] for r in rows if r.get("code") == "no-commitlog"] == ["warning"], out
    assert not any(r.get("code") == "commitlog-empty" for r in rows)
