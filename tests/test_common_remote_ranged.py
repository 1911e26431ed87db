"""Ranged reads of a remote store (moto S3 on 127.0.0.1): a verb fetches the chunks of the bytes it reads, not
whole files. A store with one 64 MiB commitlog segment (1023 units of ~64 KiB, then zeros), its consume queue
and a 24 MB index file, read with 1 MiB chunks: point reads and bounded dumps fetch a few chunks, whole scans
each byte about once, a small cache evicts and still gives the same answers; every output equals the local
run's with the store path mapped to the URL."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from remote_helpers import s3, upload  # noqa: F401  (s3: the moto server fixture)

MIB = 1 << 20
N_UNITS = 1023
PROBES = 64 << 10      # header probes (store detection) on top of the chunks


@pytest.fixture(scope="module")
def big_store(tmp_path_factory, s3):  # noqa: F811
    """(local store, its URL, commitlog size, global offsets of the units) for a store built here: the
    commitlog by the schema builder, consumequeue and index by `mqtool rebuild-index` (index geometry chosen
    so the index file is mapped, not read whole)."""
    from builders import rocketmq_unit
    from click.testing import CliRunner

    from mqtool.cli import cli

    root = tmp_path_factory.mktemp("ranged")
    store = root / "store"
    seg = store / "commitlog" / ("0" * 20)
    seg.parent.mkdir(parents=True)
    body = (bytes(range(256)) * 254)[:65000]
    units, offsets = bytearray(), []
    for i in range(N_UNITS):
        offsets.append(len(units))
        units += rocketmq_unit(body=body, phys=len(units), queue_offset=i,
                               props=f"KEYS\x01key-{i}\x02TAGS\x01a".encode(), store_ts=1_700_000_000_000 + i)
    seg.write_bytes(units + bytes((64 << 20) - len(units)))
    out = root / "rebuilt"
    r = CliRunner().invoke(cli, ["rebuild-index", str(store), "--format", "rocketmq", "--out", str(out),
                                 "--max-hash-slots", "1000000", "--max-index-num", "1000000"])
    assert r.exit_code == 0, r.output
    for name in ("consumequeue", "index"):
        shutil.copytree(out / name, store / name)
    (idx,) = list((store / "index").iterdir())
    assert idx.stat().st_size > 16 * MIB        # mapped (READ_WHOLE_LIMIT), so read by ranges
    url = upload(s3, store, "ranged/store")
    return store, url, seg.stat().st_size, offsets


@pytest.fixture
def fresh(monkeypatch):
    """Run a command on a new shadow of ``url`` with 1 MiB chunks; (exit, stdout, stderr, bytes fetched by
    every process that read that shadow)."""
    from click.testing import CliRunner

    from mqtool import remote
    from mqtool.cli import cli

    monkeypatch.setenv("MQTOOL_REMOTE_CHUNK_MB", "1")

    def run(url, *args):
        remote._stages.pop(url, None)
        r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
        # counted in the shadow: by this process and any worker it started
        return r.exit_code, r.stdout, r.stderr, remote.fetched_by_all(remote._stages[url])
    return run


def _same(local_run, remote_run, store, url):
    """The remote run prints what the local run prints, the store's path shown as its URL."""
    assert remote_run[0] == local_run[0], (remote_run, local_run)
    for a, b in zip(local_run[1:3], remote_run[1:3]):
        assert "mqtool-remote-" not in b
        assert b == a.replace(str(store), url)


def _local(*args):
    from click.testing import CliRunner

    from mqtool.cli import cli

    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize("args, most", [
    # the chunk it is in, and as far ahead as the largest message (4 MiB) a unit starting there may reach
    (("dump", "commitlog", "{s}", "--limit", "5", "--json"), 5 * MIB),
    (("query", "{s}", "--offset", "{o600}", "--json"), 2 * MIB),
    # --containing walks from a largest message (4 MiB) before the offset: the range walk's start search
    # reads a largest message around where it starts, then the units up to the one asked for
    (("query", "{s}", "--offset", "{o600}", "--containing", "--json"), 14 * MIB),
    (("query", "{s}", "--offset", "{o600p}", "--containing", "--json"), 14 * MIB),
    # the consume queue unit, then the message
    (("query", "{s}", "--topic", "T", "--queue", "0", "--queue-offset", "600", "--json"), 2 * MIB),
    # the index header, slot table and entries in use (geometry given), not the unused rest of the file
    (("dump", "index", "{s}", "--max-hash-slots", "1000000", "--max-index-num", "1000000", "--json"), 6 * MIB),
    # index geometry given: the index header, slot and entry chunks and the message's
    (("query", "{s}", "--key", "key-600", "--max-hash-slots", "1000000", "--max-index-num", "1000000", "--json"),
     6 * MIB),
    # geometry learned from the file: that reads back from the index file's end to its last entry
    (("query", "{s}", "--key", "key-600", "--json"), 24 * MIB + 6 * MIB),
    (("inspect", "{s}", "--offset", "{o600}", "--json"), 2 * MIB),
    (("inspect", "{s}/commitlog/" + "0" * 20, "--position", "{o700}", "--json"), 2 * MIB),
])
def test_point_reads_fetch_a_few_chunks(big_store, fresh, args, most):
    store, url, size, offsets = big_store

    def fill(s):
        return [a.format(s=s, o600=offsets[600], o600p=offsets[600] + 30000, o700=offsets[700]) for a in args]
    want = _local(*fill(store))
    assert want[0] == 0 and want[1].strip(), want
    argv = fill(url)
    got = fresh(next(a for a in argv if a.startswith("s3://")), *argv)      # the URL given (a store, a file)
    _same(want, got[:3], store, url)
    assert 0 < got[3] <= most + PROBES, (args, got[3])


@pytest.mark.parametrize("args", [
    ("dump", "commitlog", "{s}", "--json"),
    ("verify", "store", "{s}", "--json"),
    ("info", "{s}", "--json"),
])
def test_whole_scans_fetch_each_byte_about_once(big_store, fresh, args):
    store, url, size, _ = big_store
    total = sum(p.stat().st_size for p in store.rglob("*") if p.is_file())
    want = _local(*[a.format(s=store) for a in args])
    got = fresh(url, *[a.format(s=url) for a in args])
    _same(want, got[:3], store, url)
    assert size <= got[3] <= total + MIB, (args, got[3], size, total)


def test_a_small_cache_evicts_and_answers_the_same(big_store, fresh, monkeypatch):
    """With a 4 MiB cache a full dump of the 64 MiB segment still prints the local rows, fetches each chunk
    once (the scan goes forward), and leaves at most the cache and the window in use in the shadow."""
    from mqtool import remote

    store, url, size, _ = big_store
    monkeypatch.setenv("MQTOOL_REMOTE_CACHE_MB", "4")
    want = _local("dump", "commitlog", store, "--json")
    got = fresh(url, "dump", "commitlog", url, "--json", "--jobs", "1")        # one process: one cache
    _same(want, got[:3], store, url)
    assert len(got[1].splitlines()) == N_UNITS
    assert size <= got[3] <= size + MIB
    shadow = remote._stages[url]
    seg = shadow / "commitlog" / ("0" * 20)
    assert os.stat(seg).st_size == size
    held = os.stat(seg).st_blocks * 512
    assert held <= 4 * MIB + 5 * MIB, held      # the cache, plus the window in use (a chunk + a 4 MiB unit)
    # a point read after eviction fetches again what it needs and still reads the right unit
    code, out, _ = _local("query", url, "--offset", str(big_store[3][3]), "--json")
    assert code == 0 and json.loads(out.splitlines()[0])["queue_offset"] == 3


@pytest.fixture(scope="module")
def big_kafka(tmp_path_factory, s3):  # noqa: F811
    """(log dir, its URL, .log size, byte positions of the batches): one partition whose 40 MB segment holds
    600 one-record batches of ~64 KiB (the fixture builder's batches), no index files."""
    from builders import kafka_batch

    root = tmp_path_factory.mktemp("ranged-kafka") / "logs"
    part = root / "big-0"
    part.mkdir(parents=True)
    data, where = bytearray(), []
    for i in range(600):
        where.append(len(data))
        data += kafka_batch(i, 1, pad=65000)
    (part / ("0" * 20 + ".log")).write_bytes(data)
    return root, upload(s3, root, "ranged/kafka/logs"), len(data), where


@pytest.mark.parametrize("args, most", [
    (("dump", "commitlog", "{s}", "--limit", "5", "--json"), 3 * MIB),
    (("dump", "kafka", "{s}", "--deep", "--limit", "5", "--json"), 3 * MIB),
    (("dump", "kafka", "{s}", "--print-data", "--json"), None),
    (("inspect", "{s}/big-0/" + "0" * 20 + ".log", "--position", "{p400}", "--json"), 2 * MIB),
    (("dump", "commitlog", "{s}", "--json"), None),
    (("info", "{s}", "--json"), None),
])
def test_kafka_reads_by_ranges(big_kafka, fresh, args, most):
    root, url, size, where = big_kafka

    def fill(s):
        return [a.format(s=s, p400=where[400]) for a in args]
    want = _local(*fill(root))
    assert want[0] == 0 and want[1].strip(), want
    argv = fill(url)
    got = fresh(next(a for a in argv if a.startswith("s3://")), *argv)
    _same(want, got[:3], root, url)
    if most is None:
        assert size <= got[3] <= size + MIB, (args, got[3])
    else:
        assert 0 < got[3] <= most + PROBES, (args, got[3])


@pytest.fixture(scope="module")
def big_litemq(tmp_path_factory, s3):  # noqa: F811
    """(data dir, its URL, commitlog file size, record positions): a LiteMQ store (the fixture builder's layout) whose one 32 MiB
    commitlog file holds 400 records of ~64 KiB, then zeros."""
    from builders import litemq_builder

    from mqtool.litemq.records import encode_record, new_fields

    B = litemq_builder()
    data, where = bytearray(), []
    for i in range(400):
        where.append(len(data))
        data += encode_record(new_fields(MessageID=f"{B.T0 * 1000000 + i}-0", Topic="big", QueueID=0,
                                         Tags=["t"], Keys=[f"k-{i}"], Body=bytes([i % 251]) * 65000,
                                         BornTimestamp=B.T0 + i, StoreTimestamp=B.T0 + i))
    size = 32 * MIB
    out = tmp_path_factory.mktemp("ranged-litemq") / "broker"
    was = B.CL_SIZE
    B.CL_SIZE = size            # the builder pads each commitlog file to its CL_SIZE
    try:
        B.build_store(out, [data], {}, None, None)
    finally:
        B.CL_SIZE = was
    return out, upload(s3, out, "ranged/litemq/broker"), size, where


@pytest.mark.parametrize("args, most", [
    (("dump", "commitlog", "{s}", "--limit", "5", "--json"), 2 * MIB),
    (("dump", "commitlog", "{s}", "--json"), None),
    (("verify", "store", "{s}", "--json"), None),
    # point reads: whether a record is live is known from the chain of length prefixes from the file's start
    # (LiteMQ's own reader follows it), so a query fetches that chain up to the record (~13 MB), not the
    # file (32 MiB) nor the live data (26 MB); inspect reads the bytes at the offset only
    (("query", "{s}", "--offset", "{r200}", "--json"), 16 * MIB),
    (("query", "{s}", "--offset", "{r200x}", "--containing", "--json"), 16 * MIB),
    (("inspect", "{s}", "--offset", "{r200}", "--json"), 2 * MIB),
])
def test_litemq_reads_by_ranges(big_litemq, fresh, args, most):
    root, url, size, where = big_litemq

    def fill(s):
        return [a.format(s=s, r200=where[200], r200x=where[200] + 40000) for a in args]
    want = _local(*fill(root))
    assert want[1].strip(), want
    got = fresh(url, *fill(url))
    _same(want, got[:3], root, url)
    if most is None:
        assert size <= got[3] <= size + MIB, (args, got[3])
    else:
        assert 0 < got[3] <= most + PROBES, (args, got[3])


def test_units_longer_than_a_chunk(s3, fresh, tmp_path):  # noqa: F811
    """RocketMQ units of 3 MiB read with 1 MiB chunks (every unit spans chunks, many start just before a step):
    dump and verify print what the local copy prints, and fetch each byte once."""
    from builders import rocketmq_unit

    seg = tmp_path / "store" / "commitlog" / ("0" * 20)
    seg.parent.mkdir(parents=True)
    data = bytearray()
    for i in range(5):
        data += rocketmq_unit(body=bytes([i + 1]) * (3 * MIB - 200 + i * 4099), phys=len(data), queue_offset=i)
    seg.write_bytes(data + bytes(24 * MIB - len(data)))
    url = upload(s3, tmp_path / "store", "ranged/long-units/store")
    for args in (("dump", "commitlog", "{s}", "--json"), ("verify", "store", "{s}", "--json"),
                 ("dump", "commitlog", "{s}", "--limit", "3", "--json")):
        want = _local(*[a.format(s=tmp_path / "store") for a in args])
        got = fresh(url, *[a.format(s=url) for a in args])
        _same(want, got[:3], tmp_path / "store", url)
        assert got[3] <= 24 * MIB + MIB


def _steady(run):
    """A run's (exit, stdout, stderr) without what differs from run to run: a summary's time and output object."""
    def line(text):
        try:
            row = json.loads(text)
        except ValueError:
            return text
        for k in ("seconds", "out"):
            row.pop(k, None)
        return json.dumps(row, sort_keys=True)
    return (run[0], "\n".join(line(t) for t in run[1].splitlines()), run[2])


def _track_cached(monkeypatch, urls) -> list:
    """[the most bytes of fetched chunks this process held at once in the shadows of ``urls``] (pinned ones
    included: a whole-file map pins its file), updated after every fetch."""
    from mqtool import remote

    peak = [0]
    fill = remote.fill_range

    def tracked(path, start, end):
        fill(path, start, end)
        roots = {str(remote._shadow_root_of(str(remote._stages[u]))) for u in urls if u in remote._stages}
        peak[0] = max(peak[0], sum(n for (fkey, _), n in remote._lru.items() if fkey[0] in roots))
    monkeypatch.setattr(remote, "fill_range", tracked)
    return peak


def _held(shadow) -> int:
    """Bytes the largest file of a shadow holds on disk (fetched chunks not evicted)."""
    return max(os.stat(p).st_blocks * 512 for p in shadow.rglob("*") if p.is_file())


@pytest.mark.parametrize("which, args", [
    ("rocketmq", ("verify", "store", "{s}", "--json", "--jobs", "1")),
    ("rocketmq", ("rebuild-index", "{s}", "--out", "{out}", "--json")),
    ("rocketmq", ("rebuild-index", "{s}", "--compare", "--json")),
    ("kafka", ("verify", "store", "{s}", "--json", "--jobs", "1")),
    ("kafka", ("verify", "store", "{s}", "--deep", "--json", "--jobs", "1")),
    ("kafka", ("rebuild-index", "{s}", "--out", "{out}", "--json")),
])
def test_whole_passes_keep_to_the_cache(big_store, big_kafka, fresh, monkeypatch, tmp_path, which, args):
    """verify and rebuild-index read remote logs by ranges: with a 4 MiB cache they answer as the local run
    (rebuilt files byte-identical), fetch each byte of the log about once, and hold at most the cache and the
    windows in use, at any time and at the end (a whole-file read pins the whole file while it reads)."""
    from mqtool import remote

    root, url, size = (big_store[0], big_store[1], big_store[2]) if which == "rocketmq" else big_kafka[:3]
    monkeypatch.setenv("MQTOOL_REMOTE_CACHE_MB", "4")
    peak = _track_cached(monkeypatch, (url,))
    want = _local(*[a.format(s=root, out=tmp_path / "local") for a in args])
    got = fresh(url, *[a.format(s=url, out=tmp_path / "remote") for a in args])
    _same(_steady(want), _steady(got[:3]), root, url)
    assert size <= got[3] <= 2 * size, (args, got[3], size)
    assert _held(remote._stages[url]) <= 4 * MIB + 6 * MIB, args
    # at any time at most the cache and the windows in use (the whole log would be 40-64 MiB)
    assert peak[0] <= 4 * MIB + 16 * MIB, (args, peak[0])
    if "--out" in args:
        files = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*") if p.is_file())
        assert files and files == sorted(p.relative_to(tmp_path / "remote")
                                         for p in (tmp_path / "remote").rglob("*") if p.is_file())
        for p in files:
            assert (tmp_path / "local" / p).read_bytes() == (tmp_path / "remote" / p).read_bytes(), p


@pytest.mark.parametrize("which", ["rocketmq", "kafka", "litemq"])
def test_diff_of_remote_copies(big_store, big_kafka, big_litemq, fresh, monkeypatch, tmp_path, s3, which):  # noqa: F811
    """diff of two remote copies that differ in one message body: the local diff's rows (paths shown as the
    URLs), with a 4 MiB cache; the logs are compared in bounded reads and the difference decoded by ranges
    (a whole-file map after the compare would fetch the file again), so neither shadow holds more than the
    cache and the windows in use."""
    from mqtool import remote

    if which == "rocketmq":
        root, url, _, offsets = big_store
        seg, at = root / "commitlog" / ("0" * 20), offsets[600] + 1000
    elif which == "kafka":
        root, url, _, where = big_kafka
        seg, at = root / "big-0" / ("0" * 20 + ".log"), where[400] + 1000
    else:
        root, url, _, where = big_litemq
        (seg,) = [p for p in (root / "commitlog").iterdir() if p.is_file()]
        at = where[200] + 1000
    other = tmp_path / "b" / root.name
    shutil.copytree(root, other)
    data = bytearray(seg.read_bytes())
    data[at] ^= 0xFF
    (other / seg.relative_to(root)).write_bytes(data)
    url_b = upload(s3, other, f"ranged/diff-{which}/{root.name}")
    monkeypatch.setenv("MQTOOL_REMOTE_CACHE_MB", "4")
    peak = _track_cached(monkeypatch, (url, url_b))
    want = _local("diff", root, other, "--json")
    assert want[0] == 1 and want[1].strip(), want
    remote._stages.pop(url_b, None)
    got = fresh(url, "diff", url, url_b, "--json")
    assert got[0] == want[0]
    for a, b in zip(want[1:3], got[1:3]):
        assert b == a.replace(str(other), url_b).replace(str(root), url)
    for u in (url, url_b):
        assert _held(remote._stages[u]) <= 4 * MIB + 6 * MIB, u
    # at any time at most the cache and the window in use in each file read (the compare reads both sides
    # 4 MiB at a time: two logs, two consume queues, two index files); whole files would be 50-190 MB
    assert peak[0] <= 4 * MIB + 6 * 5 * MIB, peak[0]
    # each byte of A once for the compare; the unit chain up to the difference once more at most (the
    # boundary walk: a 4 MiB cache no longer holds what the compare read)
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert got[3] <= 2 * total + 6 * MIB, (got[3], total)


_EVICTOR = """
import sys
from mqtool import remote
path = sys.argv[1]
remote.fill_range(path, 0, 1 << 20)                 # fetches chunk 0: the first on its eviction list
print("fetched", flush=True)
sys.stdin.readline()
for i in range(1, 12):                              # 11 MiB more through a 4 MiB cache
    remote.fill_range(path, i << 20, (i + 1) << 20)
print("done", flush=True)
"""


def test_a_chunk_another_process_reads_is_not_evicted(big_store, monkeypatch):
    """Processes sharing a shadow each evict only what they fetched, but read each other's chunks: a chunk
    this process is reading in (found fetched by another process) stays while that other process evicts past
    its cache, and what this process reads is the file's bytes, not a punched hole."""
    import subprocess
    import sys

    from mqtool import remote
    from mqtool.io import map_input

    store, url, size, _ = big_store
    monkeypatch.setenv("MQTOOL_REMOTE_CHUNK_MB", "1")
    remote._stages.pop(url, None)
    seg = remote.stage(url) / "commitlog" / ("0" * 20)
    want = (store / "commitlog" / ("0" * 20)).read_bytes()[:1 << 20]
    env = dict(os.environ, MQTOOL_REMOTE_CACHE_MB="4", PYTHONPATH=os.pathsep.join(sys.path))
    other = subprocess.Popen([sys.executable, "-c", _EVICTOR, str(seg)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert other.stdout.readline().strip() == "fetched"
        with map_input(seg, ranged=True) as mi:
            mi.need(0, 1 << 20)                     # here: already fetched (by the other process)
            other.stdin.write("go\n")
            other.stdin.flush()
            assert other.stdout.readline().strip() == "done"
            same = bytes(mi.buf[:1 << 20]) == want       # (a bool: pytest would diff 1 MiB of bytes)
            assert same
            assert remote.fetched_prefix(seg) >= 1 << 20
    finally:
        other.stdin.close()
        other.wait(timeout=60)
    assert other.returncode == 0
    # chunks nobody is in were evicted by the other process (its cache is 4 MiB)
    assert os.stat(seg).st_blocks * 512 <= 6 * MIB
