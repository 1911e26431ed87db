"""CLI behaviour: exit codes, one-line errors, NDJSON vs table, no tracebacks on bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import click
import pytest

from conftest import FIXTURES, ROOT

FIXTURE_STORE = FIXTURES / "rocketmq" / "store"


def test_dump_fixture_json(run_cli):
    code, out, err = run_cli("dump", "commitlog", FIXTURE_STORE, "--json")
    assert code == 0, err
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows and all(r["kind"] == "message" and r["crc_ok"] for r in rows)
    assert {r["compression"] for r in rows} == {None, "zlib", "lz4", "zstd"}
    assert {r["magic"] for r in rows} == {"v1", "v2"}


def test_dump_filters_and_limit(run_cli):
    code, out, _ = run_cli("dump", "commitlog", FIXTURE_STORE, "--json", "--topic", "Orders", "--tag", "Tag1")
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows and all(r["topic"] == "Orders" and r["tags"] == "Tag1" for r in rows)
    code, out, _ = run_cli("dump", "commitlog", FIXTURE_STORE, "--json", "--limit", "3")
    assert len(out.splitlines()) == 3
    code, out, _ = run_cli("dump", "commitlog", FIXTURE_STORE, "--json", "--key", "order-5")
    rows = [json.loads(x) for x in out.splitlines()]
    assert len(rows) == 1 and "order-5" in rows[0]["keys"]
    code, out, _ = run_cli("dump", "commitlog", FIXTURE_STORE, "--json", "--from-offset", "4096",
                           "--to-offset", "8192", "--include-blank")
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows and all(4096 <= r["offset"] < 8192 for r in rows) and rows[-1]["kind"] == "blank"


def test_dump_other_parts(run_cli):
    for part in ("consumequeue", "index", "checkpoint", "config", "abort"):
        code, out, err = run_cli("dump", part, FIXTURE_STORE, "--json")
        assert code == 0, (part, err)
        assert out.strip(), part


def test_not_a_store_is_one_line_exit_2(run_cli, tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    code, out, err = run_cli("dump", "commitlog", tmp_path)
    assert code == 2 and err.startswith("mqtool: ") and err.count("\n") == 1 and str(tmp_path) in err
    code, out, err = run_cli("dump", "commitlog", tmp_path / "missing")
    assert code == 2 and "no such file" in err


def test_random_file_is_refused(run_cli, tmp_path):
    f = tmp_path / "00000000000000000000"
    f.write_bytes(os.urandom(5000))
    code, out, err = run_cli("dump", "commitlog", f)
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1
    code, out, err = run_cli("dump", "commitlog", f, "--format", "rocketmq", "--json")
    assert code == 1 and "bad-magic" in err and "Traceback" not in err


def test_truncated_segment_is_reported_and_exit_1(run_cli, tmp_path):
    seg = sorted((FIXTURE_STORE / "commitlog").iterdir())[0]
    cut = tmp_path / "commitlog"
    cut.mkdir()
    (cut / seg.name).write_bytes(seg.read_bytes()[:1000])
    code, out, err = run_cli("dump", "commitlog", cut, "--json")
    assert code == 1
    assert "truncated-record" in err and f"{cut / seg.name}@" in err
    assert len(out.splitlines()) >= 3     # the messages before the cut are still printed


def test_every_command_has_help_with_example():
    from mqtool.cli import cli

    def walk(cmd, path):
        yield path, cmd
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + [name])

    for path, cmd in walk(cli, []):
        if isinstance(cmd, click.Group) and path:
            continue
        assert "Example" in (cmd.help or ""), path


def test_no_duplicate_option_flags():
    from mqtool.cli import cli

    def walk(cmd):
        flags = [o for p in cmd.params for o in getattr(p, "opts", []) + getattr(p, "secondary_opts", [])]
        assert len(flags) == len(set(flags)), (cmd.name, flags)
        if isinstance(cmd, click.Group):
            for sub in cmd.commands.values():
                walk(sub)

    walk(cli)


def test_console_script_and_module_entry_points():
    r = subprocess.run([sys.executable, "-m", "mqtool", "dump", "commitlog", str(FIXTURE_STORE), "--limit", "2"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 2   # stdout is a pipe → NDJSON


def test_closed_pipe_is_quiet():
    r = subprocess.run(f"{sys.executable} -m mqtool dump commitlog {FIXTURE_STORE} | head -1", shell=True,
                       capture_output=True, text=True, cwd=ROOT)
    assert r.stderr == "" and len(r.stdout.splitlines()) == 1


def test_decode_msgid(run_cli):
    code, out, _ = run_cli("decode-msgid", "0A00000500002A9F0000000000042B6F", "--json")
    row = json.loads(out)
    assert row["as_offset_msg_id"]["store_host"] == "10.0.0.5:10911"
    assert row["as_offset_msg_id"]["physical_offset"] == 0x42B6F


def test_not_a_store_suggests_store_roots_below(run_cli, tmp_path):
    import shutil

    shutil.copytree(FIXTURE_STORE, tmp_path / "broker-a" / "store")
    code, out, err = run_cli("dump", "commitlog", tmp_path)
    assert code == 2 and "stores below it" in err and str(tmp_path / "broker-a" / "store") in err


@pytest.mark.parametrize("argv", [["verify", "store", "a"], ["verify", "commitlog", "a", "--json", "b"],
                                  ["verify", "index", "--json", "x/y"], ["verify", "consumequeue", "s"]])
def test_verify_fast_path_passes_what_click_parses(argv):
    """The start-up fast path (mqtool.entry) gives the verify engine exactly the values click's parse of the same
    line gives (defaults included), and leaves every other line to click."""
    from mqtool.cli import cli
    from mqtool.entry import fast_verify_params

    sub = cli.commands["verify"].commands[argv[1]]
    ctx = sub.make_context(argv[1], list(argv[2:]))
    assert fast_verify_params(argv) == ctx.params
    for other in (argv + ["--jobs", "2"], argv + ["-q"], argv + ["--"], ["verify", argv[1]],
                  ["verify", argv[1], "s3://bucket/store"], ["dump", "commitlog", "a"], ["verify", "all", "a"],
                  argv + ["--help"]):
        assert fast_verify_params(other) is None, other


def test_verify_fast_path_runs_like_click(tmp_path):
    """Same output, stderr and exit code through the fast path (python -m mqtool) and through click."""
    import subprocess
    import sys

    store = str(ROOT / "fixtures" / "rocketmq" / "store")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    fast = subprocess.run([sys.executable, "-m", "mqtool", "verify", "store", store, "--json"], capture_output=True,
                          env=env, cwd=tmp_path)
    slow = subprocess.run([sys.executable, "-c", "from mqtool.cli import main; main()", "verify", "store", store,
                           "--json"], capture_output=True, env=env, cwd=tmp_path)
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
    assert fast.returncode == 0 and b'"kind":"summary"' in fast.stdout
    missing = [sys.executable, "-m", "mqtool", "verify", "store", str(tmp_path / "nope")]
    r = subprocess.run(missing, capture_output=True, env=env, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count(b"\n") == 1 and b"Traceback" not in r.stderr
