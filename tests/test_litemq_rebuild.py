"""rebuild-index on the real LiteMQ stores: consumequeues byte-identical to LiteMQ's, index in its format."""
from __future__ import annotations

import gzip
import json
import struct

import pytest

from conftest import flush_log, load_json, require_realdata
from formats import litemq as F
from mqtool.litemq.store import resolve
from mqtool.litemq.rebuild import broker_toml_sizes, cq_file_size, run_rebuild
from mqtool.options import RebuildOptions


def _store(ds):
    return require_realdata("litemq", ds, "data", "broker")


def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "consumequeue").rglob("*"))
            if p.is_file()}


def _rebuild(store, **kw):
    it, sfn = run_rebuild(resolve(store), RebuildOptions(**kw))
    found = list(it)
    return found, sfn()


@pytest.mark.parametrize("ds", ["clean", "crash"])
def test_rebuilt_consumequeue_byte_identical(ds, tmp_path, run_cli):
    out = tmp_path / "out"
    code, _, err = run_cli("rebuild-index", _store(ds), "--out", out, "--cq-file-size", "384", "--json")
    assert code == 0, err
    assert _files(out) == _files(_store(ds))
    code, stdout, _ = run_cli("rebuild-index", _store(ds), "--compare", "--cq-file-size", "384", "--json")
    assert code == 0
    assert json.loads(stdout.splitlines()[-1])["cq_files_differ"] == 0


@pytest.mark.parametrize("ds", ["clean", "crash"])
def test_commitlog_alone_differs_only_where_litemq_leaves_no_trace(ds, tmp_path):
    """Without the store's queues: committed transactions are absent and entry times are the records'."""
    exp = load_json(require_realdata("litemq", ds, "expected.json"))
    out = tmp_path / "out"
    _rebuild(_store(ds), out=str(out), cq_file_size=384, no_store_hints=True)
    got = {}
    for rel, data in _files(out).items():
        _, topic, qid, name = rel.split("/")
        for i in range(0, len(data), 24):
            e = struct.unpack(">qiIq", data[i:i + 24])
            if e[1]:
                got.setdefault((topic, int(qid)), []).append(e)
    want = {}
    for m in exp["messages"]:
        if not m["accepted"] or m["type"] == "TRANSACTION":
            continue
        for c in m["consumequeue"]:
            want.setdefault((c["topic"], c["queue_id"]), []).append(
                (c["index"], (m["commitlog_offset"], c["size"], c["tag_hash"], m["store_timestamp_in_record"])))
    assert {k: [e for _, e in sorted(v)] for k, v in want.items()} == got


def test_broker_toml_and_defaults(tmp_path):
    conf = tmp_path / "broker.toml"
    conf.write_text('[broker]\nbroker_name = "b"\n[commitlog]\nfile_size = 1073741824  # 1 GiB\n'
                    '[consumequeue]\nfile_size = 600_000_000\nmax_files = 100\n')
    assert broker_toml_sizes(conf) == {"commitlog": 1073741824, "consumequeue": 600000000}
    assert cq_file_size(RebuildOptions(broker_conf=str(conf))).value == 600000000
    assert cq_file_size(RebuildOptions(broker_conf=str(conf), cq_file_size=384)).value == 384
    assert cq_file_size(RebuildOptions()).value == 629145600 == F.DEFAULT_CQ_FILE_SIZE
    conf.write_text("[consumequeue]\nfile_size = 768\n")
    out = tmp_path / "out"
    found, s = _rebuild(_store("clean"), out=str(out), broker_conf=str(conf))
    sizes = {p.stat().st_size for p in (out / "consumequeue").rglob("0*") if p.is_file()}
    assert sizes == {768} and s.extra["cq_file_size"] == 768


def test_index_in_litemq_format_matches_flushed_sample(tmp_path):
    out = tmp_path / "out"
    found, s = _rebuild(_store("clean"), out=str(out), cq_file_size=384, with_index=True)
    (idx,) = list((out / "index").iterdir())
    mine = idx.read_bytes()
    theirs = gzip.decompress(require_realdata("litemq", "clean", "extras", "index-20261122091857.gz").read_bytes())
    assert len(mine) == len(theirs) == 20_003_940
    # header: magic, version, slot count, count equal; the times are flush times, unknowable
    assert mine[:6] == theirs[:6] and mine[22:40] == theirs[22:40]
    slots_end = 40 + 4 * F.INDEX_HASH_SLOTS
    assert mine[40:slots_end] == theirs[40:slots_end]
    td = []
    for i in range(195):
        a = struct.unpack_from(">Iqii", mine, slots_end + 20 * i)
        b = struct.unpack_from(">Iqii", theirs, slots_end + 20 * i)
        assert (a[0], a[1], a[3]) == (b[0], b[1], b[3])
        td.append(a[2] == b[2])
    # timeDiff = int32(storeMs - nowSeconds); with now taken as the store second it matches on this data
    assert all(td)


def test_compare_on_a_restarted_store_lists_the_older_runs_entries_as_stale(tmp_path):
    """fixtures/litemq/restarted: the broker restarted and wrote 3 records over an older run's; each queue was
    rewritten from entry 0 and the older entries after the new count survive (reference: "Restart
    behaviour"). --compare reports those as the older run's entries, not as differences. Which entries are
    stale comes from the fixture builder (messages.json ``restarted_cq``)."""
    from collections import Counter

    from conftest import FIXTURES

    meta = load_json(FIXTURES / "litemq" / "messages.json")
    per_entry = F.CQ_ENTRY_SIZE
    stale = Counter()
    for e in meta["restarted_cq"]:
        if e["stale"]:
            file_index = e["queue_offset"] * per_entry // meta["cq_file_size"]
            stale[f"consumequeue/{e['topic']}/{e['queue_id']}/{file_index:020d}"] += 1
    assert sum(stale.values()) == 8
    found, s = _rebuild(FIXTURES / "litemq" / "restarted", compare=True)
    assert not [f for f in found if f.code in ("rebuild-entry-differs", "rebuild-missing-file",
                                              "rebuild-missing-in-store", "rebuild-size-differs")]
    got = {f.file: f.actual for f in found if f.code == "rebuild-stale-entries"}
    assert got == dict(stale)
    assert all(f.severity == "warning" for f in found if f.code == "rebuild-stale-entries")
    assert s.extra["cq_files_differ"] == 0 and s.extra["cq_stale_entries"] == 8


def test_compare_without_a_restart_keeps_extra_entries_as_differences(tmp_path):
    """An entry after the queue's end that no restart explains (the store shows none: no older records, time
    going forward) is a difference, not an older run's entry."""
    import shutil

    from conftest import FIXTURES

    store = tmp_path / "store"
    shutil.copytree(FIXTURES / "litemq" / "store", store)
    cq = next(p for p in sorted((store / "consumequeue").rglob("0000*")) if p.is_file()
              and p.read_bytes()[-24:] == bytes(24))
    data = bytearray(cq.read_bytes())
    end = len(data.rstrip(b"\0"))
    end += -end % 24                      # the first zero entry after the queue's entries
    last_ts = struct.unpack(">q", data[end - 8:end])[0]
    data[end:end + 24] = struct.pack(">qiIq", 1 << 40, 200, 7, last_ts + 10)
    cq.write_bytes(bytes(data))
    found, s = _rebuild(store, compare=True)
    assert [f.position for f in found if f.code == "rebuild-entry-differs"] == [end]
    assert not [f for f in found if f.code == "rebuild-stale-entries"] and s.extra["cq_files_differ"] == 1


def test_many_queue_files_are_published_with_a_few_flushes(tmp_path, run_cli, monkeypatch):
    """One entry per consumequeue file (--cq-file-size 24): many small files, whose entries put end to end are
    LiteMQ's own queues' (the real store's files, zero fill dropped), made durable with a bounded number of
    flushes (each file used to be fsynced, and its directory after it) and renamed only after that."""
    log = flush_log(monkeypatch)
    out = tmp_path / "out"
    code, _, err = run_cli("rebuild-index", _store("clean"), "--out", out, "--cq-file-size", "24")
    assert code == 0, err
    events = [e[0] for e in log]

    def queues(root):
        q = {}
        for rel, data in _files(root).items():
            _, topic, qid, _ = rel.split("/")
            q.setdefault((topic, qid), []).append((rel, data))
        return {k: b"".join(e for _, d in sorted(v) for e in (d[i:i + 24] for i in range(0, len(d), 24))
                            if e != bytes(24)) for k, v in q.items()}

    ours, got = _files(out), queues(out)
    assert len(ours) > 2 * len(got)
    assert got == queues(_store("clean"))
    first = events.index("publish")
    assert events.count("publish") == len(ours)
    assert events[:first] == ["sync"]                       # the files' data: one flush before any rename
    assert events.count("sync") + events.count("fsync") <= 1 + len(got)   # then at most one per directory
