"""Shell fit: completion, --quiet, NO_COLOR/--no-color, hints that suggest the next command."""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT

FIXTURE_STORE = FIXTURES / "rocketmq" / "store"
_COLOUR = ("\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[36m", "\x1b[1;31m", "\x1b[38;", "\x1b[91m")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(run_cli, shell):
    code, out, err = run_cli("completion", shell)
    assert code == 0, err
    assert "_MQTOOL_COMPLETE" in out and "mqtool" in out


def _complete(words: str, cword: int) -> list[str]:
    env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(cword), "_MQTOOL_COMPLETE": "bash_complete"}
    r = subprocess.run([sys.executable, "-m", "mqtool"], env=env, capture_output=True, text=True, cwd=ROOT,
                       timeout=60)
    return [line.split(",", 1)[1] for line in r.stdout.splitlines() if "," in line]


def test_completion_answers_commands_and_options():
    assert "info" in _complete("mqtool inf", 1)
    assert "report" in _complete("mqtool rep", 1)
    opts = _complete("mqtool report store --", 3)
    assert "--output" in opts and "--force" in opts
    assert set(_complete("mqtool completion ", 2)) == {"bash", "zsh", "fish"}


def _truncated(tmp_path):
    seg = sorted((FIXTURE_STORE / "commitlog").iterdir())[0]
    cut = tmp_path / "commitlog"
    cut.mkdir()
    (cut / seg.name).write_bytes(seg.read_bytes()[:1000])
    return cut


def test_dump_damage_note_and_hint_and_quiet(run_cli, tmp_path):
    cut = _truncated(tmp_path)
    code, out, err = run_cli("dump", "commitlog", cut, "--json")
    assert code == 1
    assert "truncated-record" in err
    assert "hint:" in err and f"mqtool verify store {cut}" in err and "--salvage-out" in err
    code, out2, err2 = run_cli("--quiet", "dump", "commitlog", cut, "--json")
    assert code == 1 and err2 == "" and out2 == out


def _damaged_fixture(tmp_path):
    dst = tmp_path / "store"
    shutil.copytree(FIXTURE_STORE, dst)
    seg = sorted((dst / "commitlog").iterdir())[1]
    data = bytearray(seg.read_bytes())
    data[300:340] = b"\xEE" * 40
    seg.write_bytes(bytes(data))
    return dst


def test_verify_suggests_salvage_only_when_useful(run_cli, tmp_path):
    store = _damaged_fixture(tmp_path)
    code, out, err = run_cli("verify", "store", store, "--json")
    assert code == 1 and "--salvage-out DIR" in err and "mqtool report" in err
    code, out, err = run_cli("verify", "store", store, "--json", "--salvage-out", tmp_path / "salv")
    assert code == 1 and "hint:" not in err
    code, out, err = run_cli("-q", "verify", "store", store, "--json")
    assert code == 1 and err == ""
    code, out, err = run_cli("verify", "store", FIXTURE_STORE, "--json")
    assert code == 0 and "hint:" not in err


def test_error_with_hint_prints_two_lines_and_quiet_keeps_the_error(capsys):
    from mqtool import render
    from mqtool.cli import guarded
    from mqtool.errors import CorruptRecordError
    from mqtool.hints import index_damaged

    @guarded
    def boom():
        raise CorruptRecordError("index entry points nowhere", "/s/index/1", 40, hint=index_damaged("/s"))

    render.configure(quiet=False)
    with pytest.raises(SystemExit) as e:
        boom()
    assert e.value.code == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "mqtool: /s/index/1@40: index entry points nowhere"
    assert err[1].startswith("mqtool: hint: ") and "--scan" in err[1]
    render.configure(quiet=True)
    try:
        with pytest.raises(SystemExit):
            boom()
        assert capsys.readouterr().err == "mqtool: /s/index/1@40: index entry points nowhere\n"
    finally:
        render.configure(quiet=False)


def test_query_hint_wording():
    from mqtool.hints import query_found_nothing

    assert query_found_nothing("/s", used_index=False) is None
    h = query_found_nothing("/s", used_index=True)
    assert "--scan" in h and "mqtool verify index /s" in h


def _render_info_to(console_factory):
    from mqtool.info import build_info
    from mqtool.options import InfoOptions
    from mqtool.render_info import render_info

    info = build_info(FIXTURE_STORE, None, InfoOptions())
    con = console_factory()            # built under FORCE_COLOR: behaves as on a colour terminal
    buf = io.StringIO()
    con.file = buf
    render_info(info, con)
    return buf.getvalue()


def test_no_color_flag_and_env(monkeypatch):
    from mqtool import render

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("TERM", "xterm-256color")
    render.configure(no_color=False)
    coloured = _render_info_to(render.stdout_console)
    assert any(c in coloured for c in _COLOUR)          # the control: colours do appear otherwise
    render.configure(no_color=True)
    try:
        plain = _render_info_to(render.stdout_console)
        assert not any(c in plain for c in _COLOUR)
        assert render.stderr_console().no_color
    finally:
        render.configure(no_color=False)
    monkeypatch.setenv("NO_COLOR", "1")
    plain = _render_info_to(render.stdout_console)
    assert not any(c in plain for c in _COLOUR)
    assert render.stderr_console().no_color and render.stdout_console().no_color
