"""Start-up of a small ``verify`` (issue #20): what it skips must not change a byte of what it writes.

* :func:`mqtool.render.write_ndjson_plain_first` (json for the first plain lines, so a small run never loads
  orjson) writes exactly what :func:`mqtool.render.write_ndjson` writes, for any rows;
* the fast path of ``python -m mqtool verify`` and the click CLI give the same output, stderr and exit code on
  every bundled fixture family.
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mqtool import ndjson, render

ROOT = Path(__file__).resolve().parents[1]

ROWS = [
    {"kind": "finding", "id": "F1", "severity": "info", "code": "zero-fill", "file": "a/b", "position": 163,
     "offset": None, "expected": None, "actual": None, "message": "ends \"here\" \\ \x00\x1f\x7f é 漢 \u2028 😀"},
    {"kind": "summary", "nested": {"a": [1, 2, (3, "x")], "b": {"c": True, "d": False}}, "big": 2 ** 63 - 1},
    {"neg": -2 ** 63, "huge": 2 ** 70, "empty": "", "list": []},          # beyond 64 bits: the careful writer
    {"ratio": 0.1, "e": 1e16, "tiny": 1e-5},                             # floats: orjson's spelling
    {"name": "caf\udcc3"},                                                 # a non-UTF-8 file name (surrogates)
    {1: "int key", "s": "str key"},                                        # a non-str key
    {"raw": b"\x00\xffbytes", "when": None},                               # bytes: base64 through _default
]


def _write(fn, rows) -> bytes:
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8", newline="\n", write_through=False)
    fn(iter(rows), out)
    out.flush()
    return raw.getvalue()


@pytest.mark.parametrize("rows", [ROWS, ROWS[:2], [ROWS[0]] * 200, ROWS[:1] + [ROWS[3]] + ROWS[:1] * 80, []])
def test_plain_first_writes_what_write_ndjson_writes(rows):
    assert _write(render.write_ndjson_plain_first, rows) == _write(render.write_ndjson, rows)


def test_plain_values_are_written_alike_by_json_and_orjson():
    lib = ndjson._load()
    if lib is None:
        pytest.skip("orjson is not installed: every line is written with json")
    text = "".join(chr(c) for c in range(0x20)) + "\"\\/\x7f\x80\u2028\u2029\ufeff" + "".join(
        chr(c) for c in range(0x100, 0x110000, 0x3FF) if not 0xD800 <= c < 0xE000)
    values = [text, 0, -1, 2 ** 64 - 1, -2 ** 63, True, False, None, [text, (1, [2])], {"k": {"l": [None, ""]}}]
    for v in values:
        assert ndjson.is_plain(v)
        # both writers' lines, after the escape of what a terminal acts on (DEL, C1, bidi, U+2028/9)
        assert ndjson._json_dumps(v).encode() == ndjson.escape_active_bytes(lib.dumps(v, option=lib.OPT_NON_STR_KEYS))
        assert ndjson._json_dumps(v) == ndjson.dumps(v), v
    for v in (0.5, {1: 2}, b"x", {"a": [1.0]}, object()):
        assert not ndjson.is_plain(v)


def test_a_small_json_run_does_not_load_orjson():
    code = ("import io, sys\n"
            "from mqtool import render\n"
            "raw = io.BytesIO(); out = io.TextIOWrapper(raw, encoding='utf-8')\n"
            "render.write_ndjson_plain_first([{'a': 1, 'b': 'x'}] * 3, out)\n"
            "assert raw.getvalue() == b'{\"a\":1,\"b\":\"x\"}\\n' * 3, raw.getvalue()\n"
            "print('orjson' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.stdout.split() == ["False"]


@pytest.mark.parametrize("store", ["fixtures/rocketmq/store", "fixtures/litemq/store", "fixtures/litemq/restarted",
                                   "fixtures/kafka/logdir"])
@pytest.mark.parametrize("flags", [[], ["--json"]])
def test_fast_path_and_click_agree(store, flags, tmp_path):
    """Same stdout, stderr and exit code through ``python -m mqtool`` (the fast path) and through click."""
    path = str(ROOT / store)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    fast = subprocess.run([sys.executable, "-m", "mqtool", "verify", "store", path, *flags], capture_output=True,
                          env=env, cwd=tmp_path)
    slow = subprocess.run([sys.executable, "-c", "from mqtool.cli import main; main()", "verify", "store", path,
                           *flags], capture_output=True, env=env, cwd=tmp_path)
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
    lines = [json.loads(x) for x in fast.stdout.splitlines()]
    assert lines and lines[-1]["kind"] == "summary"
    assert fast.returncode == (1 if lines[-1]["errors"] else 0)


def test_fastcrc_crc32c_is_the_packages_function_without_its_init():
    code = ("import os, sys\n"
            "from mqtool.fastcrc import crc32c\n"
            "assert 'crc32c' not in sys.modules and 'importlib.metadata' not in sys.modules, 'package __init__ ran'\n"
            "data = [b'', b'123456789', os.urandom(4097)]\n"
            "mine = [crc32c(d) for d in data] + [crc32c(data[2], 7)]\n"
            "import crc32c as pkg\n"
            "assert mine == [pkg.crc32c(d) for d in data] + [pkg.crc32c(data[2], 7)]\n"
            "assert mine[1] == 0xE3069283      # the CRC-32C check value (RFC 3720 / iSCSI)\n"
            "print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.stdout.split() == ["ok"], r.stderr
