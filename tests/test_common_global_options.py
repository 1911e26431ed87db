"""Global options (-q, --no-color, --color) are accepted before or after any command and listed in its help."""
from __future__ import annotations

import click
import pytest

from conftest import FIXTURES

FIXTURE_STORE = FIXTURES / "rocketmq" / "store"


def _commands(group: click.Group, prefix=()):
    for name, cmd in group.commands.items():
        yield prefix + (name,), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, prefix + (name,))


def test_every_command_lists_the_global_options(run_cli):
    from mqtool.cli import cli

    seen = 0
    for path, _cmd in _commands(cli):
        code, out, _ = run_cli(*path, "--help")
        assert code == 0, path
        for opt in ("--color", "--no-color", "-q, --quiet"):
            assert opt in out, (path, opt)
        seen += 1
    assert seen >= 15


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_anywhere_drops_hints(tmp_path, run_cli, where):
    """A damaged copy makes dump print notes and a hint on stderr; -q drops them wherever it stands."""
    import shutil

    store = tmp_path / "store"
    shutil.copytree(FIXTURE_STORE, store)
    seg = store / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    data[4:8] = b"\0\0\0\0"                    # the first unit's magic
    seg.write_bytes(bytes(data))
    code, _, err = run_cli("dump", "commitlog", store, "--json")
    assert code == 1 and "hint:" in err                    # the control: notes appear without -q
    args = ["-q", "dump", "commitlog", store, "--json"] if where == "before" else \
        ["dump", "commitlog", store, "--json", "-q"]
    code, _, err = run_cli(*args)
    assert code == 1 and err == ""


def test_quiet_does_not_leak_into_the_next_invocation(run_cli):
    from mqtool import render

    run_cli("-q", "info", FIXTURE_STORE, "--json")
    run_cli("info", FIXTURE_STORE, "--json")
    assert not render.quiet()


def test_color_always_and_never(run_cli, monkeypatch):
    from mqtool import render

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    run_cli("info", FIXTURE_STORE, "--json", "--color", "never")
    assert render.stderr_console().no_color
    monkeypatch.setenv("NO_COLOR", "1")
    run_cli("info", FIXTURE_STORE, "--json")
    assert render.stderr_console().no_color                # auto honours NO_COLOR
    run_cli("info", FIXTURE_STORE, "--json", "--color", "always")
    con = render.stderr_console()                            # an explicit always beats NO_COLOR and a pipe
    assert not con.no_color and con.is_terminal and con.color_system is not None
