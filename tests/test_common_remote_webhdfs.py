"""The HDFS code path without a Hadoop cluster: fsspec's WebHDFS client (``webhdfs://``) against a small WebHDFS
REST server this test starts on 127.0.0.1 (GETFILESTATUS, LISTSTATUS, and OPEN with offset/length answered
as a NameNode does: a 307 redirect to a "DataNode" URL that serves the bytes). The remote layer reads such a
store as it reads an s3:// one: the same output as the local copy, the URL shown, ranged reads only.
(``hdfs://`` itself goes through pyarrow's HadoopFileSystem, which needs libhdfs and a JVM: not here.)"""
from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlparse

import pytest

from conftest import FIXTURES

pytest.importorskip("fsspec")

MIB = 1 << 20


class _WebHDFS(BaseHTTPRequestHandler):
    """WebHDFS v1 over the directory ``server.root`` (HDFS path /a/b is root/a/b). Every OPEN is counted."""

    def log_message(self, *args):        # quiet
        pass

    def _json(self, code: int, doc) -> None:
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _status(self, p: Path, suffix: str) -> dict:
        st = p.stat()
        return {"pathSuffix": suffix, "type": "DIRECTORY" if p.is_dir() else "FILE",
                "length": 0 if p.is_dir() else st.st_size, "owner": "hdfs", "group": "hdfs",
                "permission": "755" if p.is_dir() else "644", "accessTime": 0,
                "modificationTime": int(st.st_mtime * 1000), "blockSize": 128 * MIB, "replication": 1}

    def do_GET(self):  # noqa: N802 (http.server's name)
        u = urlparse(self.path)
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        srv = self.server
        if u.path.startswith("/datanode/"):          # the redirect target: the bytes of one OPEN
            local = srv.root / unquote(u.path[len("/datanode/"):])
            off, n = int(q.get("offset", 0)), q.get("length")
            with open(local, "rb") as f:
                f.seek(off)
                data = f.read(int(n) if n is not None else -1)
            with srv.lock:
                srv.opens.append((str(local.relative_to(srv.root)), off, len(data)))
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if not u.path.startswith("/webhdfs/v1"):
            return self._json(404, {})
        hpath = unquote(u.path[len("/webhdfs/v1"):]) or "/"
        local = srv.root / hpath.lstrip("/")
        op = q.get("op", "").upper()
        if not local.exists():
            return self._json(404, {"RemoteException": {"exception": "FileNotFoundException",
                                                        "message": f"File does not exist: {hpath}"}})
        if op == "GETFILESTATUS":
            return self._json(200, {"FileStatus": self._status(local, "")})
        if op == "LISTSTATUS":
            kids = sorted(local.iterdir()) if local.is_dir() else []
            items = [self._status(k, k.name) for k in kids] if kids else \
                ([] if local.is_dir() else [self._status(local, "")])
            return self._json(200, {"FileStatuses": {"FileStatus": items}})
        if op == "OPEN":
            rel = quote(str(local.relative_to(srv.root)))
            loc = f"http://127.0.0.1:{srv.server_address[1]}/datanode/{rel}?offset={q.get('offset', 0)}"
            if "length" in q:
                loc += f"&length={q['length']}"
            self.send_response(307)
            self.send_header("Location", loc)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        return self._json(400, {"RemoteException": {"exception": "IllegalArgumentException",
                                                    "message": f"op {op} not served here"}})


@pytest.fixture(scope="module")
def webhdfs(tmp_path_factory):
    """(HDFS root directory on disk, 'webhdfs://127.0.0.1:<port>', the server)."""
    root = tmp_path_factory.mktemp("hdfs")
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _WebHDFS)
    srv.root, srv.lock, srv.opens = root, threading.Lock(), []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield root, f"webhdfs://127.0.0.1:{srv.server_address[1]}", srv
    finally:
        srv.shutdown()
        srv.server_close()


def _cli(*args):
    from click.testing import CliRunner

    from mqtool.cli import cli

    r = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize("verb", [
    ("dump", "commitlog", "{s}", "--json"),
    ("dump", "kafka", "{s}", "--print-data", "--json"),
    ("verify", "store", "{s}", "--json"),
    ("info", "{s}", "--json"),
    ("query", "{s}", "--offset", "3", "--json"),
])
def test_webhdfs_store_reads_as_local(webhdfs, verb):
    root, base, _srv = webhdfs
    local = FIXTURES / "kafka" / "logdir"
    hdfs = root / "stores" / "logdir"
    if not hdfs.exists():
        shutil.copytree(local, hdfs)
    url = f"{base}/stores/logdir"
    want = _cli(*[a.format(s=local) for a in verb])
    got = _cli(*[a.format(s=url) for a in verb])
    assert want[1].strip()
    assert got[0] == want[0], (got, want)
    assert "mqtool-remote-" not in got[1] + got[2]
    assert got[1] == want[1].replace(str(local), url)
    assert got[2] == want[2].replace(str(local), url)


def test_webhdfs_reads_by_ranges(webhdfs, monkeypatch):
    """`dump --limit 5` of a 40 MB segment asks the DataNode for a few 1 MiB ranges only; a missing path is a
    one-line error naming the URL."""
    from builders import kafka_batch

    from mqtool import remote

    root, base, srv = webhdfs
    part = root / "big" / "logs" / "big-0"
    part.mkdir(parents=True)
    data = b"".join(kafka_batch(i, 1, pad=65000) for i in range(600))
    (part / ("0" * 20 + ".log")).write_bytes(data)
    monkeypatch.setenv("MQTOOL_REMOTE_CHUNK_MB", "1")
    url = f"{base}/big/logs"
    want = _cli("dump", "kafka", root / "big" / "logs", "--limit", "5", "--json")
    del srv.opens[:]
    got = _cli("dump", "kafka", url, "--limit", "5", "--json")
    assert got[0] == want[0] == 0 and got[1] == want[1].replace(str(root / "big" / "logs"), url)
    served = sum(n for _, _, n in srv.opens)
    assert 0 < served <= 3 * MIB, srv.opens
    assert all(n <= MIB for _, _, n in srv.opens)         # one chunk per request at most
    assert remote.fetched_by_all(remote._stages[url]) == served

    code, out, err = _cli("verify", "store", f"{base}/no/such/store")
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"{base}/no/such/store" in err


def test_hdfs_scheme_needs_libhdfs_and_says_so(tmp_path):
    """``hdfs://`` goes to pyarrow's HadoopFileSystem; without libhdfs (as here) the error is one line, exit 2."""
    code, out, err = _cli("info", "hdfs://127.0.0.1:9/store")
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert len(err) < 600 and "libhdfs" in err and "webhdfs://" in err, err
