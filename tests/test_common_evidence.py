"""Evidence safety: running any command over a store changes nothing in it.

Every command runs over *copies* of the real stores (in-process, so an audit hook sees every ``open`` and
``mmap``). Afterwards every input file has the same bytes, size and mtime, no entry was added or removed, and
no directory mtime moved (which would betray a temp file created and deleted inside the input tree). During
the run, the audit hook fails the test on any open of an input path for writing and any writable mapping.

Families plug in through :data:`FAMILY_RUNS` (stores under the realdata folder, the module that must exist,
the commands to run). LiteMQ and Kafka rows are skipped until their engines are merged.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import sys
from pathlib import Path

import pytest

from conftest import ROOT, realdata_root, require_realdata, snapshot, writable_copy

# {s} = the store copy, {out} = a scratch directory outside it, {first} = first message offset placeholder
_COMMON_TAIL = [
    ("hash", "{s}"),
    ("hash", "{s}", "--sha256sum"),
    ("info", "{s}", "--json"),
    ("report", "{s}", "-o", "{out}/report.html"),
]
FAMILY_RUNS = {
    "rocketmq": {
        "stores": "rocketmq/*/store",
        "module": "mqtool.rocketmq.ops",
        "commands": [
            ("dump", "commitlog", "{s}", "--body", "base64", "--include-blank"),
            ("dump", "consumequeue", "{s}"),
            ("dump", "index", "{s}", "--slots"),
            ("dump", "checkpoint", "{s}"),
            ("dump", "config", "{s}"),
            ("dump", "abort", "{s}"),
            ("verify", "store", "{s}", "--salvage-out", "{out}/salvage", "--manifest", "{out}/manifest.ndjson"),
            ("verify", "commitlog", "{s}"),
            ("verify", "consumequeue", "{s}"),
            ("verify", "index", "{s}"),
        ] + _COMMON_TAIL,
        "optional": {     # module -> commands (merged later by the lead)
            "mqtool.rocketmq.rebuild": [("rebuild-index", "{s}", "--out", "{out}/rebuilt", "--compare")],
            "mqtool.rocketmq.query": [("query", "{s}", "--key", "orderA-1"), ("query", "{s}", "--offset", "0"),
                                      ("query", "{s}", "--scan", "--time-from", "0", "--body", "text")],
        },
    },
    "litemq": {
        "stores": "litemq/*/data/broker",
        "module": "mqtool.litemq.ops",
        "commands": [
            ("dump", "commitlog", "{s}", "--body", "base64", "--include-stale"),
            ("dump", "consumequeue", "{s}"),
            ("dump", "checkpoint", "{s}"),             # crash/: none (one-line error, exit 2)
            ("dump", "abort", "{s}"),
            ("dump", "index", "{s}", "--slots"),
            ("verify", "store", "{s}", "--salvage-out", "{out}/salvage", "--manifest", "{out}/manifest.ndjson"),
            ("verify", "commitlog", "{s}"),
            ("verify", "consumequeue", "{s}"),
            ("verify", "index", "{s}"),
            ("rebuild-index", "{s}", "--out", "{out}/rebuilt", "--compare", "--cq-file-size", "384", "--with-index"),
            ("rebuild-index", "{s}", "--out", "{out}/rebuilt-default", "--compare"),   # 600 MiB files, sparse
            ("query", "{s}", "--key", "order-0001"),
            ("query", "{s}", "--scan", "--key", "order-0001"),
            ("query", "{s}", "--offset", "0", "--containing"),
            ("query", "{s}", "--topic", "orders.v1", "--queue", "0", "--queue-offset", "1", "--count", "3"),
            ("query", "{s}", "--time-from", "2026-11-22T00:00:00Z", "--body", "text"),
        ] + _COMMON_TAIL,
        "optional": {},
    },
    "kafka": {
        "stores": "kafka/*",
        "module": "mqtool.kafka.ops",
        "commands": [
            ("dump", "kafka", "{s}", "--deep", "--print-data"),
            ("dump", "commitlog", "{s}", "--key", "k", "--body", "hex"),
            ("verify", "store", "{s}", "--salvage-out", "{out}/salvage", "--manifest", "{out}/manifest.ndjson"),
            ("verify", "commitlog", "{s}", "--deep"),
            ("verify", "index", "{s}"),
            ("rebuild-index", "{s}", "--out", "{out}/rebuilt", "--compare"),
            ("query", "{s}", "--offset", "0"),
            ("query", "{s}", "--timestamp", "2020-01-01T00:00:00Z"),
            ("query", "{s}", "--key", "k"),
            ("query", "{s}", "--producer-id", "1000"),
        ] + _COMMON_TAIL,
        "optional": {},
    },
}


def _has(module: str) -> bool:
    try:
        importlib.import_module(module)
        return True
    except ImportError:
        return False


def _cases():
    root = realdata_root()
    out = []
    for fam, spec in FAMILY_RUNS.items():
        stores = sorted(root.glob(spec["stores"])) if root.exists() else []
        stores = [p for p in stores if p.is_dir()]
        for p in stores or [None]:
            name = str(p.relative_to(root)) if p else f"{fam}/(none)"
            out.append(pytest.param(fam, name, id=name))
    return out


class WriteAudit:
    """sys.addaudithook: record opens of paths inside ``root`` that could write, and writable mmaps."""

    _installed = None
    _WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def __init__(self):
        self.root: str | None = None
        self.violations: list[str] = []

    @classmethod
    def get(cls) -> "WriteAudit":
        if cls._installed is None:
            cls._installed = cls()
            sys.addaudithook(cls._installed._hook)
        return cls._installed

    def _hook(self, event, args):
        root = self.root
        if root is None:
            return
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            if path is None or isinstance(path, int):
                return
            try:
                p = os.path.abspath(os.fsdecode(path))
            except (TypeError, ValueError):
                return
            if not (p == root or p.startswith(root + os.sep)):
                return
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and flags & self._WRITE_FLAGS)
            if writes:
                self.violations.append(f"open({p!r}, mode={mode!r}, flags={flags!r})")
        elif event == "mmap.__new__":
            access = args[2] if len(args) > 2 else None
            import mmap

            if access not in (mmap.ACCESS_READ,):
                self.violations.append(f"mmap(access={access!r})")


@pytest.mark.parametrize("family,name", _cases())
def test_commands_change_nothing_in_the_input(tmp_path, run_cli, family, name):
    spec = FAMILY_RUNS[family]
    if not _has(spec["module"]):
        pytest.skip(f"{spec['module']} is not in this build yet")
    if name.endswith("(none)"):
        require_realdata(family)
        pytest.skip(f"no {family} store under the realdata folder")
    src = require_realdata(*Path(name).parts)
    store = writable_copy(src, tmp_path / "in" / src.name)
    out = tmp_path / "out"
    out.mkdir()
    commands = list(spec["commands"])
    for mod, cmds in spec["optional"].items():
        if _has(mod):
            commands += cmds
    before = snapshot(tmp_path / "in")
    audit = WriteAudit.get()
    audit.root = os.path.abspath(tmp_path / "in")
    audit.violations.clear()
    try:
        for i, cmd in enumerate(commands):
            args = [a.format(s=store, out=out / str(i)) for a in cmd]
            code, stdout, stderr = run_cli(*args)          # exceptions propagate: a traceback fails the test
            assert code in (0, 1, 2), (args, code, stderr)
            if os.environ.get("MQTOOL_EVIDENCE_TRACE"):
                print(code, len(stdout), args[:2], stderr[:100].strip())
            if code == 2:
                assert stderr.count("\n") == 1, (args, stderr)
                continue
            # the command did its work (an output written, rows printed), so the run above exercised it
            for opt in ("--salvage-out", "--manifest", "--out"):
                if opt in args:
                    assert Path(args[args.index(opt) + 1]).exists(), (args, stderr)
            if args[:2] in (["dump", "commitlog"], ["dump", "kafka"]) and "--key" not in args:
                assert stdout.strip(), args
    finally:
        audit.root = None
    assert audit.violations == []
    after = snapshot(tmp_path / "in")
    assert after.keys() == before.keys(), (set(after) ^ set(before))
    changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    assert changed == {}


def test_the_audit_hook_catches_a_write(tmp_path):
    """The audit above can fail: an open for writing inside the watched tree is recorded."""
    (tmp_path / "in").mkdir()
    f = tmp_path / "in" / "x"
    f.write_bytes(b"a")
    audit = WriteAudit.get()
    audit.root = os.path.abspath(tmp_path / "in")
    audit.violations.clear()
    try:
        with open(f, "r+b"):
            pass
        os.close(os.open(f, os.O_RDONLY))
    finally:
        audit.root = None
    assert len(audit.violations) == 1 and "r+" in audit.violations[0]


# ---- outputs: never inside the input tree, never half-written ---------------------------------------------

def _storewritable_copy(tmp_path) -> Path:
    return writable_copy(require_realdata("rocketmq", "gen-4.9.7-clean", "store"), tmp_path / "in" / "store")


def test_outputs_inside_the_input_tree_are_refused(tmp_path, run_cli):
    store = _storewritable_copy(tmp_path)
    before = snapshot(store)
    for args in (("verify", "store", store, "--salvage-out", store / "salvage"),
                 ("verify", "store", store, "--salvage-out", store / "commitlog"),
                 ("verify", "store", store / "commitlog", "--salvage-out", store / "x"),
                 ("verify", "store", store, "--manifest", store / "m.ndjson"),
                 ("verify", "store", store, "--manifest", store / "index" / "m.ndjson")):
        # (a --salvage-out directory that merely contains the store is accepted since issue #15: one new
        # file beside the store touches no input; tests/test_common_loss.py checks it for every family)
        code, out, err = run_cli(*args)
        assert code == 2 and "refusing to write inside the input tree" in err, (args, err)
    link = tmp_path / "innocent-looking"
    link.symlink_to(store / "index")                   # a path outside that resolves inside
    for args in (("verify", "store", store, "--salvage-out", link / "salvage"),
                 ("verify", "store", store, "--manifest", link / "m.ndjson")):
        code, out, err = run_cli(*args)
        assert code == 2 and "input tree" in err, (args, err)
    if _has("mqtool.rocketmq.rebuild"):
        code, out, err = run_cli("rebuild-index", store, "--out", store / "rebuilt")
        assert code == 2 and "input tree" in err
    assert snapshot(store) == before


def test_manifest_matches_an_independent_hash(tmp_path, run_cli):
    store = _storewritable_copy(tmp_path)
    m = tmp_path / "manifest.ndjson"
    code, out, err = run_cli("verify", "store", store, "--manifest", m, "--json")
    assert code == 0
    rows = [json.loads(x) for x in m.read_text().splitlines()]
    entries = {r["path"]: r for r in rows if r["kind"] == "manifest_entry"}
    files = {str(p.relative_to(store)): p for p in store.rglob("*") if p.is_file()}
    assert entries.keys() == files.keys()
    for rel, p in files.items():
        e = entries[rel]
        assert e["sha256"] == hashlib.sha256(p.read_bytes()).hexdigest()
        assert e["size"] == p.stat().st_size and e["mtime_ns"] == p.stat().st_mtime_ns
    summary = rows[-1]
    assert summary["kind"] == "manifest" and summary["files"] == len(files) and summary["unhashed"] == 0
    code, out, err = run_cli("verify", "store", store, "--manifest", m)
    assert code == 2 and "exists" in err                     # no silent overwrite
    code, out, err = run_cli("hash", store, "--sha256sum")
    lines = sorted(out.splitlines())
    assert lines == sorted(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {rel}" for rel, p in files.items())


def test_hash_lists_special_files_without_reading_them(tmp_path, run_cli):
    store = _storewritable_copy(tmp_path)
    os.mkfifo(store / "commitlog" / "00000000000009999999")
    (store / "loop").symlink_to("loop")
    (store / "again").symlink_to(".")                            # a directory cycle: listed once
    code, out, err = run_cli("hash", store, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    types = {r["path"]: r["type"] for r in rows if r["kind"] == "manifest_entry"}
    assert types["commitlog/00000000000009999999"] == "fifo" and types["loop"] == "unreadable"
    assert not any(p.startswith("again/") for p in types)
    assert code == 1 and rows[-1]["unhashed"] == 1


def test_atomic_writer_leaves_nothing_when_interrupted(tmp_path):
    from mqtool.io import AtomicWriter

    target = tmp_path / "out.ndjson"
    with pytest.raises(KeyboardInterrupt):
        with AtomicWriter(target) as f:
            f.write(b"half")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_interrupted_salvage_leaves_no_half_file(tmp_path, monkeypatch):
    from mqtool.options import VerifyOptions
    from mqtool.rocketmq import verify as V
    from mqtool.rocketmq.store import open_store

    store = _storewritable_copy(tmp_path)
    out = tmp_path / "salvage"
    calls = {"n": 0}
    real_add = V._Salvage.add

    def add(self, m):
        calls["n"] += 1
        if calls["n"] == 50:
            raise KeyboardInterrupt
        real_add(self, m)

    monkeypatch.setattr(V._Salvage, "add", add)
    findings, _ = V.verify_store(open_store(store), "store", VerifyOptions(salvage_out=str(out), progress=False))
    with pytest.raises(KeyboardInterrupt):
        list(findings)
    assert list(out.iterdir()) == []
    # a consumer that stops early (closed pipe) leaves nothing either
    monkeypatch.setattr(V._Salvage, "add", real_add)
    out2 = tmp_path / "salvage2"
    findings, _ = V.verify_store(open_store(store), "store", VerifyOptions(salvage_out=str(out2), progress=False))
    next(iter(findings), None)
    findings.close()
    assert list(out2.iterdir()) == []


# ---- static audit: inputs only through mqtool.io ------------------------------------------------------------

_RAW_IO = re.compile(r"(?<![\w.])open\(|\bos\.open\(|\bio\.open\(|\bmmap\.mmap\(|\.open\(|\.write_bytes\(|"
                     r"\.write_text\(|\.read_bytes\(|\.read_text\(|\bos\.(remove|unlink|rename|replace|truncate)\(")
_ALLOWED = {
    "mqtool/io.py": None,                                   # the one place that opens files
    "mqtool/remote.py": None,   # the remote side of mqtool.io: its private shadow tree, objects opened read-only
    "mqtool/entry.py": {"devnull = os.open(os.devnull, os.O_WRONLY)"},
}


def test_no_raw_file_access_outside_mqtool_io():
    bad = []
    for p in sorted((ROOT / "mqtool").rglob("*.py")):
        rel = str(p.relative_to(ROOT))
        allowed = _ALLOWED.get(rel, set())
        if allowed is None:
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if _RAW_IO.search(code) and code.strip() not in allowed:
                bad.append(f"{rel}:{i}: {line.strip()}")
    assert bad == [], "file access must go through mqtool.io:\n" + "\n".join(bad)


def test_reading_does_not_touch_access_times(tmp_path, run_cli):
    """Inputs are opened with O_NOATIME where allowed: even atime stays as it was."""
    if not hasattr(os, "O_NOATIME"):
        pytest.skip("no O_NOATIME on this platform")
    store = _storewritable_copy(tmp_path)
    probe = store / "lock"
    old = probe.stat().st_mtime - 10_000
    os.utime(probe, (old, probe.stat().st_mtime))
    with open(probe, "rb") as f:                 # does a plain read update atime on this filesystem?
        f.read()
    if probe.stat().st_atime == old:
        pytest.skip("this filesystem does not update atime on read (noatime mount)")
    files = [p for p in store.rglob("*") if p.is_file()]
    for p in files:
        os.utime(p, (p.stat().st_mtime - 10_000, p.stat().st_mtime))
    before = {p: p.stat().st_atime_ns for p in files}
    for args in (("dump", "commitlog", store), ("verify", "store", store), ("hash", store)):
        run_cli(*args)
    assert {p: p.stat().st_atime_ns for p in files} == before
