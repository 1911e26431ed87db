"""Hostile files dropped into the log directory of a real store, for every family.

Family-agnostic: each family is one row of :data:`FAMILY_LOGS` (where a real store is, which directory
holds the log segments, how a new segment is named, which commands read it). Rows of families whose engine is
not in this build are skipped; after the merge they run as they are (adjust a row if a guess is wrong).
The RocketMQ-specific checks, with exact findings, are in ``test_rocketmq_hostile.py``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from conftest import require_realdata
from conftest import alarm


def _next_name(existing: list[str], suffix: str = "") -> str:
    nums = [int(re.match(r"(\d{20})", n).group(1)) for n in existing if re.match(r"\d{20}" + re.escape(suffix) + "$", n)]
    return f"{(max(nums) + 1 if nums else 0) + 10**9:020d}{suffix}"


FAMILY_LOGS = {
    "rocketmq": {"store": ("rocketmq", "gen-4.9.7-clean", "store"), "log_dir": "commitlog", "suffix": "",
                 "commands": [("dump", "commitlog"), ("verify", "store")]},
    "litemq": {"store": ("litemq", "clean", "data", "broker"), "log_dir": "commitlog", "suffix": "",
               "commands": [("dump", "commitlog"), ("verify", "store")]},
    "kafka": {"store": ("kafka", "kafka-python-3.0.12-patched", "kp-0"), "log_dir": ".", "suffix": ".log",
              "commands": [("dump", "kafka"), ("verify", "store")]},
}

HOSTILE = ["fifo", "symlink-loop", "device", "sparse-2gib", "empty", "garbage", "unreadable-dir-entry"]
UNREADABLE = {"fifo", "symlink-loop", "device", "unreadable-dir-entry"}   # never opened: file-unreadable


def _plant(kind: str, d: Path, name: str) -> None:
    p = d / name
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "symlink-loop":
        p.symlink_to(name)
    elif kind == "device":
        p.symlink_to("/dev/zero")
    elif kind == "sparse-2gib":
        with open(p, "wb") as f:
            f.truncate(2 << 30)
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "garbage":
        p.write_bytes(bytes((i * 131 + 7) % 251 for i in range(70_000)))
    elif kind == "unreadable-dir-entry":
        p.mkdir()                    # a directory where a segment file is expected
        (p / "x").write_bytes(b"x")


@pytest.mark.parametrize("kind", HOSTILE)
@pytest.mark.parametrize("family", sorted(FAMILY_LOGS))
def test_hostile_file_in_log_dir(tmp_path, run_cli, family, kind):
    try:
        __import__(f"mqtool.{family}.ops")
    except ImportError:
        pytest.skip(f"mqtool.{family} is not in this build yet")
    spec = FAMILY_LOGS[family]
    src = require_realdata(*spec["store"])
    store = tmp_path / src.name
    shutil.copytree(src, store, symlinks=True)
    for p in [store, *store.rglob("*")]:
        if not p.is_symlink():
            p.chmod(0o755 if p.is_dir() else 0o644)
    d = store / spec["log_dir"]
    name = _next_name(os.listdir(d), spec["suffix"])
    _plant(kind, d, name)
    for cmd in spec["commands"]:
        with alarm(90):
            code, out, err = run_cli(*cmd, store, "--json")     # a traceback propagates and fails the test
        assert code in (0, 1, 2), (cmd, code, err)
        if code == 2:
            assert err.count("\n") == 1 and err.startswith("mqtool: "), (cmd, err)
        assert "Traceback" not in err
        if cmd[0] == "verify":
            # the planted file is named in a finding (the rest of the store is still read: exit 1, not 2)
            assert code == 1, (cmd, code, err)
            about = [json.loads(ln) for ln in out.splitlines() if name in ln]
            assert any(r.get("kind") == "finding" for r in about), (kind, out[-2000:])
            if kind in UNREADABLE:
                assert any(r["code"].endswith("file-unreadable") for r in about), (kind, about)
        if cmd[0] == "dump" and kind in UNREADABLE:
            assert code == 1 and "file-unreadable" in err and name in err, (cmd, code, err)
