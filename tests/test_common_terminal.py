"""Data never controls the terminal (issue 16, item 2).

Stores whose topics, tags, keys, property names, bodies, Kafka keys/values/header keys and file and
directory names carry terminal controls (ESC[2J, an OSC 0 window title, an OSC 8 hyperlink, the one-byte
CSI U+009B, an SGR colour), a right-to-left override U+202E and rich markup that does not parse (``[/red]``)
are shown by every command under a real pseudo-terminal, as a person would see them. Nothing that came from
the data may reach the terminal as a control: with ``--no-color`` / ``NO_COLOR`` the output holds no ESC at
all; with colour forced, every escape is one of the terminal styling/cursor sequences rich itself writes,
and none of the data's own sequences appears raw. The escapes must show up visibly instead (``\\x1b[2J``).
"""
from __future__ import annotations

import fcntl
import os
import pty
import re
import shutil
import struct
import sys
import termios
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT
from mqtool.sanitize import visible

# The data's hostile pieces. Names (files, directories) cannot hold "/", so they use an opening tag only.
PIECES = ["\x1b[2J", "\x1b]0;PWNED\x07", "\x1b]8;;http:evil\x1b\\link\x1b]8;;\x1b\\", "\u009b31m", "\u202eRTL",
          "\x7f\u0085\u061c\u200e\u2028\u2069", "\x1b[31mMARK"]
HOSTILE = "".join(PIECES) + "[/red]0[bold]x"
NAME = "".join(PIECES) + "[red]0[bold]x"
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
# what rich itself writes on a colour terminal: SGR styles (and nothing else: no progress bar here, see -q)
_TERMINAL_OWN = re.compile(r"\x1b\[[0-9;]*m")


def _rocketmq(root: Path) -> Path:
    from builders import rocketmq_unit as unit

    hb = HOSTILE.encode()
    store = root / ("st" + NAME)
    (store / "commitlog").mkdir(parents=True)
    props = b"KEYS\x01" + hb + b"\x02TAGS\x01" + hb + b"\x02" + hb + b"\x01" + hb
    a = unit(topic=hb, body=hb, props=props, phys=0)
    b = unit(topic=hb, body=b"x", props=props, phys=len(a), queue_offset=1)
    (store / "commitlog" / ("0" * 20)).write_bytes(a + b)
    (store / ("f" + NAME)).write_bytes(b"x")
    return store


def _kafka(root: Path) -> Path:
    from builders import kafka_builder

    BK = kafka_builder()

    hb = HOSTILE.encode()
    logdir = root / ("kl" + NAME)
    part = logdir / (NAME + "-0")
    part.mkdir(parents=True)
    rec = BK.record(0, 0, hb, hb, [(hb, hb)])
    (part / ("0" * 20 + ".log")).write_bytes(BK.batch_v2(0, [rec], base_ts=BK.T0, max_ts=BK.T0))
    (part / ("f" + NAME)).write_bytes(b"x")
    return logdir


def _litemq(root: Path) -> Path:
    store = root / ("lm" + NAME)
    shutil.copytree(FIXTURES / "litemq" / "store", store)
    (store / "consumequeue" / "orders").rename(store / "consumequeue" / NAME)
    (store / ("f" + NAME)).write_bytes(b"x")
    return store


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    return {"rocketmq": _rocketmq(root), "kafka": _kafka(root), "litemq": _litemq(root), "root": root}


def run_pty(args, env_extra: dict, cols: int = 400) -> tuple[int, bytes]:
    """``python -m mqtool ARGS`` with stdin/stdout/stderr on a pseudo-terminal; everything it wrote."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES")}
    env.update(PYTHONPATH=str(ROOT), TERM="xterm-256color", **env_extra)
    pid, fd = pty.fork()
    if pid == 0:    # the child: exec at once
        try:
            os.execve(sys.executable, [sys.executable, "-m", "mqtool", *map(str, args)], env)
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    out = bytearray()
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:     # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), bytes(out)


def _commands(s: dict, root: Path):
    r, k, lm = s["rocketmq"], s["kafka"], s["litemq"]
    return [
        ("dump", "commitlog", r), ("dump", "commitlog", r, "--body", "text"),
        ("query", r, "--scan", "--key", HOSTILE), ("query", r, "--key", HOSTILE),
        ("verify", "store", r), ("info", r), ("hash", r), ("hash", r, "--sha256sum"),
        ("rebuild-index", r, "--compare"), ("report", r, "-o", root / ("r" + NAME + ".html"), "--force"),
        ("dump", "commitlog", r / ("missing" + NAME)),
        ("dump", "kafka", k, "--deep", "--print-data"), ("dump", "commitlog", k, "--body", "text"),
        ("query", k, "--offset", "0", "--body", "text"), ("query", k, "--key", HOSTILE),
        ("verify", "store", k, "--deep"), ("info", k), ("hash", k), ("rebuild-index", k, "--compare"),
        ("dump", "commitlog", lm, "--body", "text"), ("dump", "consumequeue", lm), ("verify", "store", lm),
        ("info", lm), ("hash", lm), ("query", lm, "--scan", "--key", "order-0001"),
        ("rebuild-index", lm, "--compare"),
    ]


def _controls(text: str) -> list[str]:
    return sorted({repr(c) for c in text if (ord(c) < 0x20 and c not in "\r\n") or 0x7f <= ord(c) <= 0x9f
                   or c in _BIDI})


def _check_common(args, code: int, text: str) -> None:
    assert "Traceback" not in text and "MarkupError" not in text, (args, text[-2000:])
    assert code in (0, 1, 2), (args, code, text[-2000:])
    if code == 2:                             # one line, on a terminal too
        assert text.count("\n") == 1 and text.startswith("mqtool: "), (args, text)


@pytest.mark.parametrize("family", ["rocketmq", "kafka", "litemq"])
def test_no_control_from_the_data_reaches_the_terminal(stores, family):
    seen_escaped = False
    for i, args in enumerate(_commands(stores, stores["root"])):
        if stores[family] not in args:
            continue
        # without colour: not one ESC, not one other control; --no-color and NO_COLOR alike
        plain_args, env = (["--no-color", *args], {}) if i % 2 else (list(args), {"NO_COLOR": "1"})
        code, out = run_pty(plain_args, env)
        text = out.decode("utf-8", "replace")
        _check_common(args, code, text)
        assert b"\x1b" not in out, (args, text[:3000])
        assert _controls(text) == [], (args, text[:3000])
        seen_escaped = seen_escaped or "\\x1b[2J" in text
        # with colour: only rich's own styling escapes; none of the data's sequences raw
        code, out = run_pty(["-q", *args], {"FORCE_COLOR": "1"})
        text = out.decode("utf-8", "replace")
        _check_common(args, code, text)
        if args[0] in ("dump", "verify", "info", "rebuild-index") and code != 2:      # tables: styled
            assert "\x1b[" in text, (args, "colour was not on: the test proves less")
        for piece in PIECES:
            assert piece not in text, (args, piece)
        assert _controls(_TERMINAL_OWN.sub("", text)) == [], (args, text[:3000])
    assert seen_escaped, "the hostile strings were never shown (escaped): the stores are not exercised"


def test_markup_in_data_is_shown_literally(stores):
    """A key ``[/red]0`` used to crash the table (rich.errors.MarkupError); now it is plain text."""
    code, out = run_pty(["--no-color", "dump", "commitlog", stores["rocketmq"]], {})
    text = out.decode("utf-8", "replace")
    assert code == 0, text[-3000:]
    cells = re.sub(r"[\s│]", "", text)            # a long cell folds over several lines of the table
    assert "MARK[/red]0[bold]x" in cells, text[:3000]


def test_ndjson_is_unchanged(stores):
    """NDJSON is exact data for programs: the key comes back byte for byte (JSON escapes the controls)."""
    import json

    code, out = run_pty(["dump", "commitlog", stores["rocketmq"], "--json"], {"NO_COLOR": "1"})
    rows = [json.loads(x) for x in out.decode("utf-8").splitlines() if x.strip()]
    assert code == 0 and rows and rows[0]["topic"] == HOSTILE


@pytest.mark.parametrize("native", ["1", "0"])
def test_ndjson_on_a_terminal_holds_no_control(stores, native):
    """--json on a terminal wrote the data's U+009B and U+202E raw (JSON allows them); now no line of any
    family, compiled writer or not, holds a control, and json.loads gives back the data's exact strings."""
    import json

    r, k, lm = stores["rocketmq"], stores["kafka"], stores["litemq"]
    outs = {}
    for args in (("dump", "commitlog", r), ("dump", "commitlog", r, "--body", "text"), ("dump", "commitlog", k,
                 "--body", "text"), ("dump", "kafka", k, "--deep", "--print-data"), ("dump", "commitlog", lm),
                 ("query", r, "--scan", "--key", HOSTILE), ("verify", "store", r)):
        code, out = run_pty([*args, "--json"], {"NO_COLOR": "1", "MQTOOL_NATIVE": native})
        text = out.decode("utf-8")
        _check_common(args, code, text)
        assert _controls(text) == [], (args, text[:2000])
        rows = [json.loads(x) for x in text.splitlines() if x.strip()]
        outs[args] = rows
    for args in list(outs)[:2]:
        assert outs[args][0]["topic"] == HOSTILE, args
    assert outs[("dump", "commitlog", r, "--body", "text")][0]["body"] == HOSTILE
    kafka_record = outs[("dump", "kafka", k, "--deep", "--print-data")][1]
    assert kafka_record["value"] == kafka_record["key"] == HOSTILE and kafka_record["headers"] == [[HOSTILE, HOSTILE]]


# Every code point JSON lets stand unescaped but a terminal acts on (DEL, C1, bidirectional controls, U+2028/9),
# each with the escape a JSON writer gives it, written out by hand; and neighbours of theirs that stay as they are.
ACTIVE = "\x7f\u0080\u0085\u009b\u009f\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
ACTIVE_ESCAPED = ("\\u007f\\u0080\\u0085\\u009b\\u009f\\u061c\\u200e\\u200f\\u2028\\u2029\\u202a\\u202b\\u202c\\u202d"
                  "\\u202e\\u2066\\u2067\\u2068\\u2069")
NEIGHBOURS = "~\u00a0\u00ff\u061b\u061d\u200d\u2010\u2027\u202f\u2065\u206a\u4e2d\U0001F600"


def test_every_json_writer_escapes_what_a_terminal_acts_on():
    """U+202E and U+009B are legal raw in JSON, and json/orjson wrote them raw: a line shown on a terminal
    reordered or controlled it. Every writer now gives them as \\uXXXX (the same string to a JSON reader)."""
    import io
    import json

    from mqtool import ndjson, render

    row = {"t" + ACTIVE: ACTIVE + NEIGHBOURS, "n": [ACTIVE, 1]}
    want = ('{"t%s":"%s%s","n":["%s",1]}' % (ACTIVE_ESCAPED, ACTIVE_ESCAPED, NEIGHBOURS, ACTIVE_ESCAPED))
    assert len(ACTIVE_ESCAPED) == 6 * len(ACTIVE)
    odd = dict(row, f="\udcff")                   # a non-UTF-8 file name: the careful writer (ensure_ascii)
    assert ndjson.dumps(row) == ndjson._json_dumps(row) == want
    assert ndjson.encode_row_fast(row) == want.encode()
    assert b"".join(ndjson.ndjson_blocks([row, row])) == (want + "\n").encode() * 2
    assert ndjson.dumps(odd).isascii() and json.loads(ndjson.dumps(odd)) == odd     # DEL too (ensure_ascii keeps it)

    class Out(io.StringIO):
        encoding = "utf-8"

        def __init__(self):
            super().__init__()
            self.buffer = io.BytesIO()

    for write in (render.write_ndjson, render.write_ndjson_plain_first):
        out = Out()
        assert write([row, ndjson.PreRendered(ndjson.dumps(row))], out) == 2
        assert out.getvalue().encode() + out.buffer.getvalue() == (want + "\n").encode() * 2, write
    assert json.loads(want) == row


def test_visible_escapes():
    """The sanitiser on its own: expected strings written by hand."""
    assert visible("plain Ünïcode 中文 ok") == "plain Ünïcode 中文 ok"
    assert visible("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert visible("\x00\x07\t\n\r\x7f") == "\\x00\\x07\\t\\n\\r\\x7f"
    assert visible("\u009b\u0085") == "\\u009b\\u0085"
    assert visible("\u202eabc\u2066\u2069\u200e\u200f\u061c\u2028") == \
        "\\u202eabc\\u2066\\u2069\\u200e\\u200f\\u061c\\u2028"
    assert visible("back\\slash") == "back\\\\slash"
    assert visible(os.fsdecode(b"name\xff")) == "name\\xff"            # a file name that is not UTF-8
    assert visible(12) == "12"


def test_sha256sum_lines_survive_odd_names(tmp_path, run_cli):
    """``hash --sha256sum`` into a file: names with a newline, backslash or CR escaped as coreutils does, so
    ``sha256sum -c`` (the independent check) accepts every line; on a terminal the names are sanitised."""
    if shutil.which("sha256sum") is None:
        pytest.skip("no sha256sum here")
    import subprocess

    store = tmp_path / "store"
    store.mkdir()
    for i, name in enumerate(["plain", "new\nline", "back\\slash", "cr\rname", "esc\x1b[2J"]):
        (store / name).write_bytes(b"x" * i)
    code, out, err = run_cli("hash", store, "--sha256sum")
    assert code == 0, err
    (tmp_path / "SUMS").write_text(out)
    r = subprocess.run(["sha256sum", "-c", str(tmp_path / "SUMS")], cwd=store, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.count("OK") == 5, (r.stdout, r.stderr, out)
    code, out = run_pty(["hash", store, "--sha256sum"], {"NO_COLOR": "1"})
    assert code == 0 and b"\x1b" not in out and b"esc\\x1b[2J" in out and b"new\\nline" in out


@pytest.mark.parametrize("form", ["csv", "tsv"])
def test_csv_and_tsv_on_a_terminal_are_escaped(stores, run_cli, form):
    """`--as csv`/`--as tsv` on a terminal wrote the data's ESC[2J, OSC and U+202E raw (a person reads it
    there); now each cell is shown as visible escapes. Into a pipe the cells stay exact data."""
    for args in (("dump", "commitlog", stores["rocketmq"]), ("dump", "kafka", stores["kafka"], "--print-data")):
        code, out = run_pty([*args, "--as", form], {"NO_COLOR": "1"})
        text = out.decode("utf-8", "replace")
        _check_common(args, code, text)
        assert b"\x1b" not in out and [c for c in _controls(text) if c != repr("\t")] == [], (args, text[:2000])
        assert "\\x1b[2J" in text, (args, text[:2000])
    code, piped, err = run_cli("dump", "commitlog", stores["rocketmq"], "--as", form)
    assert code == 0 and HOSTILE in piped, piped[:500]
