"""Stores on S3 (a real S3-compatible server, moto, started on 127.0.0.1 by the tests): the verbs read an
s3:// store exactly as they read the same store from disk, fetch only the files they open, and `export --to
s3://...` writes the dataset there without overwriting."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import FIXTURES, require_realdata

from remote_helpers import BUCKET, _stores, s3, upload  # noqa: E402,F401  (s3: the moto server fixture)


VERBS = {
    "dump": lambda s: ["dump", "commitlog", s, "--json"],
    "verify": lambda s: ["verify", "store", s, "--json"],
    "query": lambda s: ["query", s, "--offset", "3", "--containing", "--json"],
    "info": lambda s: ["info", s, "--json"],
}


def _norm(text: str, store: str) -> str:
    return text.replace(store.rstrip("/"), "<STORE>")


@pytest.mark.parametrize("family", ["rocketmq", "litemq", "kafka"])
def test_verbs_read_s3_store_as_local(s3, run_cli, family):
    from mqtool import remote

    local = _stores()[family]
    url = upload(s3, local, f"verbs/{family}/{local.name}")
    for verb, args in VERBS.items():
        want = run_cli(*args(str(local)))
        got = run_cli(*args(url))
        assert got[0] == want[0], (verb, got, want)
        assert want[1].strip(), (verb, want)
        # paths are shown as the URL (never the local shadow), in rows, findings and notes alike
        assert "mqtool-remote-" not in got[1] + got[2], (verb, got)
        assert _norm(got[1], url) == _norm(want[1], str(local)), verb
        assert _norm(got[2], url) == _norm(want[2], str(local)), verb


@pytest.mark.parametrize("family", ["rocketmq", "litemq", "kafka"])
def test_export_local_from_s3_to_s3(s3, run_cli, family, tmp_path):
    """export --engine local of an s3:// store equals the export of the local copy; --to s3:// puts the same
    files there, and a second export without --force is refused without touching what is there."""
    import pyarrow.parquet as pq

    local = _stores()[family]
    url = upload(s3, local, f"export/{family}/{local.name}")
    want = run_cli("export", str(local), "--to", tmp_path / "local.parquet")
    assert want[0] == 0, want
    out = f"s3://{BUCKET}/out/{family}.parquet"
    got = run_cli("export", url, "--to", out)
    assert got[0] == 0, got
    from mqtool import remote

    shadow = str(remote._stages[url])
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"out/{family}.parquet/")["Contents"])
    assert not any(".mqtool-tmp-" in k for k in keys)
    assert keys
    dl = tmp_path / "dl"
    for k in keys:
        dest = dl / k
        dest.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(BUCKET, k, str(dest))
    a = pq.read_table(tmp_path / "local.parquet").to_pylist()
    b = pq.read_table(dl / "out" / f"{family}.parquet").to_pylist()
    assert len(a) == len(b) > 0

    def norm(rows, root):
        return sorted(repr({k: (v.replace(root, "<S>") if isinstance(v, str) else v) for k, v in r.items()
                            if k not in ("store", "store_full")}) for r in rows)
    assert norm(b, url) == norm(a, str(local))
    assert "mqtool-remote-" not in repr(b) and shadow not in repr(b)
    stores = {k.split("/")[2] for k in keys}        # out/<family>.parquet/store=<the URL, escaped>/...
    assert stores == {"store=" + url.replace("%", "%25").replace("/", "%2F").replace(":", "%3A")}, stores
    again = run_cli("export", url, "--to", out)
    assert again[0] == 2 and "exists" in again[2], again
    after = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"out/{family}.parquet/")["Contents"])
    assert after == keys
    assert run_cli("export", url, "--to", out, "--force")[0] == 0


def test_fetches_only_what_is_opened(s3, run_cli):
    """Staging lists names and sizes only; a header read fetches that prefix (one ranged request, into memory),
    a later full read the file once; `dump --limit 5` of a many-partition Kafka log dir fetches the segment it reads,
    far less than the store."""
    from mqtool import remote
    from mqtool.io import read_input

    local = require_realdata("kafka", "kaipasubhash-kafka-logs-2022")
    total = sum(p.stat().st_size for p in local.rglob("*") if p.is_file())
    url = upload(s3, local, "fetch/kafka")
    shadow = remote.stage(url)
    assert remote.fetched.get(url, 0) == 0
    seg = max((p for p in shadow.rglob("*.log")), key=lambda p: p.stat().st_size)
    real = local / seg.relative_to(shadow)
    size = real.stat().st_size
    assert size > 1000
    assert read_input(seg, 61) == real.read_bytes()[:61]
    assert remote.fetched[url] == 61
    assert read_input(seg) == real.read_bytes()
    assert remote.fetched[url] == 61 + size         # the probe went to memory only; the file, once, to the shadow
    assert read_input(seg) == real.read_bytes() and remote.fetched[url] == 61 + size      # fetched once
    before = remote.fetched[url]
    code, out, _ = run_cli("dump", "commitlog", url, "--limit", "5", "--json")
    assert code == 0 and len(out.splitlines()) == 5
    assert 0 < remote.fetched[url] - before < total / 10, (remote.fetched[url], total)


def test_hostile_key_names(s3, run_cli):
    """A key whose path has `..`, or an empty component, is never made a local path (skipped, with a warning);
    control characters in a name are shown escaped."""
    from mqtool import remote

    local = FIXTURES / "kafka" / "logdir"
    url = upload(s3, local, "hostile/logdir")
    s3.put_object(Bucket=BUCKET, Key="hostile/logdir/../../escape", Body=b"x")
    s3.put_object(Bucket=BUCKET, Key="hostile/logdir/fixture-0//twice", Body=b"x")
    s3.put_object(Bucket=BUCKET, Key="hostile/logdir/evil\x1b[31m-0/00000000000000000000.log", Body=b"")
    warned: list[str] = []
    shadow = remote.stage(url, warned.append)
    root = remote._shadow_root_of(str(shadow))
    made = {str(p.relative_to(root)) for p in root.rglob("*")}
    assert not any(".." in m.split(os.sep) or "escape" in m or "twice" in m for m in made), made
    assert len(warned) >= 2 and all("\x1b" not in w or "skipped" in w for w in warned)
    assert not (root.parent / "escape").exists() and not (root / "escape").exists()
    code, out, err = run_cli("info", url)
    assert "\x1b" not in out + err


def test_missing_remote_store_is_a_one_line_error(s3, run_cli):
    code, out, err = run_cli("verify", "store", f"s3://{BUCKET}/no/such/store")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "no such file" in err and "Traceback" not in err, err


def test_a_local_store_that_looks_like_a_shadow_is_never_written(tmp_path):
    """Only our own private shadow (mode 0700, this user) is filled: a store that merely sits in a directory
    named like one, with a planted marker, is an input and stays as it is."""
    import json
    import tempfile

    from mqtool import remote
    from mqtool.io import read_input

    root = Path(tempfile.mkdtemp(prefix="mqtool-remote-", dir=tempfile.gettempdir()))
    try:
        os.chmod(root, 0o755)
        seg = root / "tree" / "s3" / "b" / "x.log"
        seg.parent.mkdir(parents=True)
        seg.write_bytes(b"evidence")
        (root / "state").mkdir()
        (root / ".mqtool-remote.json").write_text(json.dumps(
            {"url": "s3://b", "protocol": "s3", "files": {"tree/s3/b/x.log": {"key": "b/x.log", "size": 8}}}))
        assert remote._shadow_root_of(str(seg)) is None
        assert read_input(seg) == b"evidence"
    finally:
        import shutil

        shutil.rmtree(root)


def test_dump_limit_fetches_a_prefix_of_a_big_segment(s3, run_cli, tmp_path, monkeypatch):
    """`dump --limit N` of a 64 MiB remote commitlog segment fetches the chunks (1 MiB here) its rows lie in
    and one more ahead, far less than the segment, and prints what the local copy prints; more rows, or
    fewer units than N, fetch more and still print the same."""
    from builders import rocketmq_unit

    from mqtool import remote

    monkeypatch.setenv("MQTOOL_REMOTE_CHUNK_MB", "1")
    seg = tmp_path / "store" / "commitlog" / ("0" * 20)
    seg.parent.mkdir(parents=True)
    body = (bytes(range(256)) * 254)[:65000]     # ~64 KiB units: 1023 of them, then zeros, make 64 MiB
    units = bytearray()
    for i in range(1023):
        units += rocketmq_unit(body=body, phys=len(units), queue_offset=i)
    seg.write_bytes(units + bytes((64 << 20) - len(units)))
    size = seg.stat().st_size
    url = upload(s3, tmp_path / "store", "bounded/store")
    for limit, most in ((5, 5 << 20), (40, 8 << 20), (2000, None)):     # + the 4 MiB a unit may reach, + probes
        want = run_cli("dump", "commitlog", tmp_path / "store", "--limit", limit, "--json")
        before = remote.fetched.get(url, 0)
        got = run_cli("dump", "commitlog", url, "--limit", limit, "--json")
        assert got[0] == want[0] == 0 and len(got[1].splitlines()) == min(limit, 1023)
        assert _norm(got[1], url) == _norm(want[1], str(tmp_path / "store")), limit
        assert _norm(got[2], url) == _norm(want[2], str(tmp_path / "store")), limit    # notes of one try only
        if most is not None:
            assert 0 < remote.fetched[url] - before <= most + 4096, (limit, remote.fetched[url] - before)
    assert size <= remote.fetched[url] <= size + 4096     # each byte fetched once over the three runs (+ probes)


def test_a_hostile_store_url_is_shown_escaped_never_as_the_shadow(s3, run_cli):
    """A store whose URL's names hold a control character, a quote and a bidi override: every output names
    it by its URL, escaped (JSON escapes, valid in NDJSON, harmless on a terminal), never by the shadow."""
    import json

    local = FIXTURES / "kafka" / "logdir"
    url = upload(s3, local, "hostile-url/ev\x1b[31mil\"\u202e")
    for args in (("info", url, "--json"), ("dump", "commitlog", url, "--json"), ("verify", "store", url),
                 ("info", url)):
        code, out, err = run_cli(*args)
        assert code in (0, 1), (args, code, err)
        assert "mqtool-remote-" not in out + err, args
        assert "\x1b" not in out + err and "\u202e" not in out + err, args
        if "--json" in args:
            for line in out.splitlines():
                json.loads(line)
    code, out, _ = run_cli("info", url, "--json")
    assert json.loads(out.splitlines()[0])["path"] == url        # the exact URL, once the JSON is read


def test_diff_and_carve_name_urls(s3, run_cli, tmp_path):
    """`diff` of two remote copies and `carve` of a remote file print what the local runs print, every path
    shown as its URL."""
    import shutil

    local = _stores()["rocketmq"]
    a, b = tmp_path / "a" / "store", tmp_path / "b" / "store"
    shutil.copytree(local, a)
    shutil.copytree(local, b)
    seg = sorted((b / "commitlog").iterdir())[0]
    data = bytearray(seg.read_bytes())
    data[200] ^= 0xFF                       # one byte differs in B
    seg.chmod(0o644)
    seg.write_bytes(bytes(data))
    ua, ub = upload(s3, a, "diff/a/store"), upload(s3, b, "diff/b/store")
    want = run_cli("diff", a, b, "--json")
    got = run_cli("diff", ua, ub, "--json")
    assert want[0] == got[0] == 1 and want[1].strip(), want
    assert "mqtool-remote-" not in got[1] + got[2]
    assert got[1] == want[1].replace(str(a), ua).replace(str(b), ub)
    image = sorted((a / "commitlog").iterdir())[0]
    uimg = f"{ua}/commitlog/{image.name}"
    want = run_cli("carve", image, "--json")
    got = run_cli("carve", uimg, "--json")
    assert want[0] == got[0] and want[1].strip(), want
    assert "mqtool-remote-" not in got[1] + got[2]
    assert got[1] == want[1].replace(str(image), uimg)


def test_output_files_name_urls(s3, run_cli, tmp_path):
    """Files written for a remote store (the HTML report, the salvage NDJSON, a hash manifest) name its files by
    their URL, as the local run's name them by path; binary outputs are not touched (rebuild-index)."""
    local = _stores()["rocketmq"]
    url = upload(s3, local, "outfiles/store")
    for name, args in (("salvage.ndjson", ("verify", "store", "{s}", "--salvage-out", "{o}")),
                       ("manifest.ndjson", ("verify", "store", "{s}", "--manifest", "{o}"))):
        a, b = tmp_path / ("local-" + name), tmp_path / ("remote-" + name)
        want = run_cli(*[x.format(s=local, o=a) for x in args])
        got = run_cli(*[x.format(s=url, o=b) for x in args])
        assert want[0] == got[0], (want, got)
        text = b.read_text()
        assert "mqtool-remote-" not in text and url in text, name
        if name == "salvage.ndjson":
            assert text == a.read_text().replace(str(local), url), name
    code, out, err = run_cli("report", url, "-o", tmp_path / "r.html")
    assert code in (0, 1), err
    html = (tmp_path / "r.html").read_text()
    assert "mqtool-remote-" not in html and url in html
    assert run_cli("rebuild-index", url, "--out", tmp_path / "rb")[0] == 0
    assert run_cli("rebuild-index", local, "--out", tmp_path / "rb-local")[0] == 0
    for p in sorted((tmp_path / "rb-local").rglob("*")):
        if p.is_file():
            assert (tmp_path / "rb" / p.relative_to(tmp_path / "rb-local")).read_bytes() == p.read_bytes()


@pytest.mark.parametrize("args", [("dump", "commitlog", "{}", "--json", "--jobs", "2", "--split-size", "4K"),
                                  ("dump", "kafka", "{}", "--json", "--jobs", "2", "--split-size", "1K")],
                         ids=["rocketmq-direct-workers", "kafka-spooled-workers"])
def test_worker_output_written_to_a_real_stdout_names_urls(s3, tmp_path, args):
    """With workers, output reaches stdout straight from them (RocketMQ: forked writers on the descriptor;
    Kafka: spool pieces copied with sendfile). Run as a user runs it (a real file as stdout, not an in-process
    runner), every path must still be the URL and the lines those of the local run."""
    import subprocess
    import sys

    family = "rocketmq" if args[1] == "commitlog" else "kafka"
    local = _stores()[family]
    url = upload(s3, local, f"workers/{family}/{local.name}")
    root = Path(__file__).resolve().parent.parent

    def run(store):
        out = tmp_path / "out.ndjson"
        with open(out, "wb") as fh:
            p = subprocess.run([sys.executable, "-m", "mqtool", *[a.format(store) for a in args]], stdout=fh,
                               stderr=subprocess.PIPE, text=True, timeout=300, cwd=root,
                               env=dict(os.environ, PYTHONPATH=str(root)))
        return p.returncode, out.read_text(), p.stderr

    want, got = run(str(local)), run(url)
    assert want[1].count("\n") > 1, want
    assert got[0] == want[0], (got, want)
    assert "mqtool-remote-" not in got[1] + got[2]
    assert _norm(got[1], url) == _norm(want[1], str(local))
