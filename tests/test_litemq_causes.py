"""LiteMQ root causes: what a consume-queue entry pointing at missing or unreadable commitlog bytes names as its
cause, and which code it gets (reference/litemq.md §2: file index i holds global offsets [i*fileSize,
(i+1)*fileSize), every file preallocated to fileSize; §4: 24-byte entries [i64 offset][i32 size]..., a zero size
ends the queue)."""
from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from conftest import FIXTURES

ENTRY = struct.Struct(">qiIq")
FILE_SIZE = 4096                  # the fixture's commitlog files (both exactly this size on disk)


def _store(tmp_path) -> Path:
    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "litemq" / "store", store)
    assert {p.stat().st_size for p in (store / "commitlog").iterdir()} == {FILE_SIZE}
    return store


def _entries(store: Path) -> dict[tuple[str, int], int]:
    """(queue file relative to the store, position) → commitlog offset, for every entry before the first zero
    size of its queue, read from the files here."""
    out = {}
    for qdir in sorted(p for p in (store / "consumequeue").glob("*/*") if p.is_dir()):
        done = False
        for f in sorted(qdir.iterdir()):
            data = f.read_bytes()
            for pos in range(0, len(data) - ENTRY.size + 1, ENTRY.size):
                off, size, _, _ = ENTRY.unpack_from(data, pos)
                if size == 0:
                    done = True
                    break
                out[(str(f.relative_to(store)), pos)] = off
            if done:
                break
    return out


def _verify(run_cli, store):
    code, out, _ = run_cli("verify", "store", store, "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    return code, [r for r in rows if r["kind"] == "finding"], rows[-1]


@pytest.mark.parametrize("index", [0, 1])
def test_entries_into_an_unreadable_file_follow_from_it(run_cli, tmp_path, index):
    """A commitlog file replaced by a directory: its ``file-unreadable`` finding spans the bytes the store lays
    out for that file (file index × file size, one file size long), so every entry pointing there names it as
    its cause, and verify and info count that range as damaged."""
    store = _store(tmp_path)
    seg = store / "commitlog" / f"{index:020d}"
    seg.unlink()
    seg.mkdir()
    lo, hi = index * FILE_SIZE, (index + 1) * FILE_SIZE
    into = {k for k, off in _entries(store).items() if lo <= off < hi}
    assert into
    code, findings, summary = _verify(run_cli, store)
    root, = [f for f in findings if f["code"] == "file-unreadable"]
    assert code == 1 and root["caused_by"] is None and root["offset"] == lo
    by_place = {(f["file"], f["position"]): f for f in findings if f["file"] and f["file"].startswith("consumequeue")
                and f["severity"] == "error"}
    assert {k: by_place[k]["caused_by"] for k in into} == {k: root["id"] for k in into}
    assert (summary["damaged_ranges"], summary["damaged_bytes"]) == (1, FILE_SIZE)
    _, out, _ = run_cli("info", store, "--json")
    info = json.loads(out)
    assert (info["damage_total"], info["damaged_bytes"]) == (1, FILE_SIZE)
    assert [(d["code"], d["offset"], d["length"]) for d in info["damage"]] == [("file-unreadable", lo, FILE_SIZE)]


def test_entries_of_a_store_without_commitlog_files_point_past_its_end(run_cli, tmp_path):
    """No commitlog file: there is no byte of data, so every entry points past the end (``cq-beyond-end``, the
    end 0; as RocketMQ's ``cq-dangling``), not at something that is no record start; each follows from
    ``commitlog-empty``."""
    store = _store(tmp_path)
    for seg in (store / "commitlog").iterdir():
        seg.unlink()
    want = _entries(store)
    code, findings, _ = _verify(run_cli, store)
    root, = [f for f in findings if f["code"] == "commitlog-empty"]
    cq = {(f["file"], f["position"]): f for f in findings if f["code"].startswith("cq-")}
    assert code == 1 and set(cq) == set(want)
    assert {f["code"] for f in cq.values()} == {"cq-beyond-end"}
    assert {k: (f["offset"], f["expected"], f["caused_by"]) for k, f in cq.items()} == \
        {k: (off, 0, root["id"]) for k, off in want.items()}


def test_entries_past_an_exactly_full_last_file_point_past_the_end(run_cli, tmp_path):
    """The last file exactly full (file 1 gone, file 0 holds records to its last byte): the data ends at the
    end of file 0, and the entries into file 1 point past it."""
    store = _store(tmp_path)
    (store / "commitlog" / f"{1:020d}").unlink()
    beyond = {k: off for k, off in _entries(store).items() if off >= FILE_SIZE}
    assert beyond
    code, findings, summary = _verify(run_cli, store)
    cq = {(f["file"], f["position"]): f for f in findings if f["code"].startswith("cq-")}
    assert code == 1 and set(cq) == set(beyond)
    assert {k: (f["code"], f["offset"], f["expected"]) for k, f in cq.items()} == \
        {k: ("cq-beyond-end", off, FILE_SIZE) for k, off in beyond.items()}
    # where the data ends, as the summary and info say it: the end of file 0 (it was null: no file had a tail)
    assert summary["end_offset"] == FILE_SIZE
    _, out, _ = run_cli("info", store, "--json")
    assert json.loads(out.splitlines()[0])["overview"]["commitlog"]["data_end"] == FILE_SIZE


def test_adjoining_records_with_contradicting_fields_are_separate_roots(tmp_path):
    """Two records side by side, each whole (its length prefix leads to the next) with a field that contradicts
    where it is (a StoreSize that is not its size; a CommitLogOffset that is not its offset): two roots, two
    damaged ranges (they merged into one root)."""
    from builders import litemq_builder
    from mqtool import causes
    from mqtool.litemq.store import resolve
    from mqtool.litemq.verify import run_verify
    from mqtool.options import VerifyOptions

    B = litemq_builder()
    recs, at = [], []
    for i, bad in enumerate([{"StoreSize": 7}, {"CommitLogOffset": 12345}, {}]):
        fields = B.new_fields(MessageID=f"m{i}", Topic="T", Body=b"body %d" % i, BornTimestamp=B.T0,
                              StoreTimestamp=B.T0, **bad)
        at.append(sum(len(r) for r in recs))
        recs.append(B.encode_record(fields))
    data = b"".join(recs)
    seg = tmp_path / "broker" / "commitlog" / f"{0:020d}"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(data + bytes(FILE_SIZE - len(data)))
    findings, summary_fn = run_verify("commitlog", resolve(tmp_path / "broker"), VerifyOptions(progress=False))
    gen, summary = causes.linked(findings, summary_fn)
    errors = [(f.code, f.span, f.caused_by) for f in gen if f.severity == "error"]
    assert errors == [("store-size-mismatch", (at[0], at[1]), None),
                      ("commitlog-offset-mismatch", (at[1], at[2]), None)]
    assert (summary().damaged_ranges, summary().damaged_bytes) == (2, at[2])
