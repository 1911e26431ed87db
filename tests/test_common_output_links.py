"""Outputs never follow a link into anything (issue 16, item 1).

Every writing command is first run into a clean directory to learn what it writes (names are the command's
own, so the test does not restate them). Then, level by level, each of those paths is replaced by a symbolic
link into the store (a directory link to the store directory of the same name, else the store root; a file
link to the store file of the same name, else a commitlog/log segment), and the command is run again,
without and with ``--force``. Without ``--force`` it refuses (one line, exit 2); with it every link is
replaced, never written through. Either way the store is byte/size/mtime identical (the snapshot of
tests/test_common_evidence.py, directories included).
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT
from conftest import snapshot, writable_copy as _copy

STORES = {
    "rocketmq": FIXTURES / "rocketmq" / "store",
    "kafka": FIXTURES / "kafka" / "logdir",
    "litemq": FIXTURES / "litemq" / "store",
}

# (id, family, arguments with {s} = store and {o} = the output directory, whether --force applies)
COMMANDS = [
    ("rmq-rebuild", "rocketmq", ("rebuild-index", "{s}", "--out", "{o}", "--write-checkpoint")),
    ("kafka-rebuild", "kafka", ("rebuild-index", "{s}", "--out", "{o}")),
    ("kafka-rebuild-partition", "kafka", ("rebuild-index", "{s}/fixture-0", "--out", "{o}")),
    ("litemq-rebuild", "litemq", ("rebuild-index", "{s}", "--out", "{o}", "--cq-file-size", "384",
                                  "--with-index")),
    ("rmq-salvage", "rocketmq", ("verify", "store", "{s}", "--salvage-out", "{o}")),
    ("kafka-salvage", "kafka", ("verify", "store", "{s}", "--salvage-out", "{o}")),
    ("litemq-salvage", "litemq", ("verify", "store", "{s}", "--salvage-out", "{o}/salvage.ndjson")),
    ("manifest", "rocketmq", ("verify", "store", "{s}", "--manifest", "{o}/manifest.ndjson")),
    ("report", "kafka", ("report", "{s}", "-o", "{o}/report.html")),
    ("export", "rocketmq", ("export", "{s}", "--to", "{o}", "--findings")),
    ("export-kafka", "kafka", ("export", "{s}", "--to", "{o}")),
]


def _args(cmd, store: Path, out: Path, force: bool) -> list[str]:
    args = [a.format(s=store, o=out) for a in cmd]
    return args + (["--force"] if force else [])


def _written(out: Path) -> dict[str, bool]:
    """relative path -> is a directory, for everything the command wrote (lstat: no link here)."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(out):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            assert not p.is_symlink()
            found[str(p.relative_to(out))] = p.is_dir()
    return found


def _target(store: Path, rel: str, is_dir: bool) -> Path:
    """What a planted link points at: the store's own entry of that name when there is one."""
    name = Path(rel).name
    for cand in [store / rel, *sorted(store.rglob(name))]:
        if cand.exists() and cand.is_dir() == is_dir:
            return cand
    if is_dir:
        return store
    return max((p for p in store.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


def _plant(out: Path, store: Path, written: dict[str, bool], depth: int) -> dict[str, Path]:
    """Real directories down to ``depth``, a link at every written path of that depth."""
    links = {}
    for rel, is_dir in sorted(written.items()):
        parts = Path(rel).parts
        if len(parts) == depth:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            target = _target(store, rel, is_dir)
            (out / rel).symlink_to(target, target_is_directory=is_dir)
            links[rel] = target
    return links


def _depths(written: dict[str, bool]) -> list[int]:
    return sorted({len(Path(r).parts) for r in written})


def _cases():
    out = []
    for cid, fam, cmd in COMMANDS:
        for force in (False, True):
            out.append(pytest.param(fam, cmd, force, id=f"{cid}-{'force' if force else 'noforce'}"))
    return out


def _needs(cmd):
    if cmd[0] == "export":
        pytest.importorskip("pyarrow")


@pytest.mark.parametrize("family,cmd,force", _cases())
def test_planted_links_are_never_followed(tmp_path, run_cli, family, cmd, force):
    _needs(cmd)
    store = _copy(STORES[family], tmp_path / "in" / STORES[family].name)
    clean = tmp_path / "clean"
    code, _, err = run_cli(*_args(cmd, store, clean, False))
    assert code in (0, 1), err
    written = _written(clean)
    assert written, "the command wrote nothing: the test would prove nothing"
    before = snapshot(tmp_path / "in")
    depths = _depths(written)
    assert depths, written
    for depth in depths:
        out = tmp_path / f"out-{depth}"
        links = _plant(out, store, written, depth)
        assert links
        code, stdout, err = run_cli(*_args(cmd, store, out, force))
        assert snapshot(tmp_path / "in") == before, (depth, force)
        assert "Traceback" not in err
        if not force:
            assert code == 2 and err.startswith("mqtool: ") and err.count("\n") == 1, (depth, err)
            assert "not empty" in err or "exists" in err or "symbolic link" in err, err
            for rel in links:
                assert (out / rel).is_symlink(), rel       # refused: left as it was
        else:
            assert code in (0, 1), (depth, err)
            for rel, is_dir in written.items():          # every link replaced by what the command writes
                p = out / rel
                assert not p.is_symlink() and p.is_dir() == is_dir, (depth, rel)
            for rel, is_dir in written.items():
                if not is_dir and not rel.endswith((".html", ".parquet")):
                    assert (out / rel).read_bytes() == (clean / rel).read_bytes(), rel


def test_a_link_at_the_temporary_name_is_not_written_through(tmp_path, run_cli, monkeypatch):
    """Temporary names are created with O_EXCL|O_NOFOLLOW: a link already there makes us pick another."""
    from mqtool import io

    store = _copy(STORES["rocketmq"], tmp_path / "in" / "store")
    before = snapshot(tmp_path / "in")
    out = tmp_path / "out"
    out.mkdir()
    victim = store / "commitlog" / "00000000000000000000"
    planted = ".mqtool-tmp-planted"
    (out / planted).symlink_to(victim)
    (out / "consumequeue").mkdir()
    (out / "consumequeue" / planted).symlink_to(victim)
    names = iter([planted] * 3)
    real = io._temp_name
    monkeypatch.setattr(io, "_temp_name", lambda: next(names, None) or real())
    code, _, err = run_cli("rebuild-index", store, "--out", out, "--force", "--write-checkpoint")
    assert code == 0, err
    code, _, err = run_cli("verify", "store", store, "--manifest", out / "m.ndjson")
    assert code == 0, err
    assert (out / planted).is_symlink() and (out / "consumequeue" / planted).is_symlink()
    assert (out / "checkpoint").is_file() and (out / "m.ndjson").is_file()
    assert snapshot(tmp_path / "in") == before


def test_force_replaces_a_link_in_place_of_a_single_output_file(tmp_path, run_cli):
    store = _copy(STORES["rocketmq"], tmp_path / "in" / "store")
    before = snapshot(tmp_path / "in")
    out = tmp_path / "out"
    out.mkdir()
    (out / "r.html").symlink_to(store / "checkpoint")
    (out / "dangling.html").symlink_to(store / "no-such-file")       # would create a file in the store
    for name in ("r.html", "dangling.html"):
        code, _, err = run_cli("report", store, "-o", out / name)
        assert code == 2 and "exists" in err, err
        code, _, err = run_cli("report", store, "-o", out / name, "--force")
        assert code in (0, 1), err
        assert not (out / name).is_symlink() and (out / name).read_bytes().startswith(b"<!")
    assert snapshot(tmp_path / "in") == before
    assert not (store / "no-such-file").exists()


def _report_to(target, stdout, *extra):
    import subprocess
    import sys

    from conftest import ROOT

    return subprocess.run([sys.executable, "-m", "mqtool", "report", str(STORES["rocketmq"]), "-o", str(target),
                           *extra], stdout=stdout, stderr=subprocess.PIPE, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_dev_stdout_is_written_in_place_into_a_pipe_or_a_file(tmp_path, name):
    """`report -o /dev/stdout --force` replaced the /dev/stdout link with a regular file; now the descriptor
    the shell opened (a pipe, or a file for `> out.html`) is written, without --force, and the link is kept.
    The report alone goes there (not its path after it, as for a file)."""
    import subprocess

    r = _report_to(name, subprocess.PIPE)
    assert r.returncode == 0 and r.stdout.startswith(b"<!DOCTYPE html>") and r.stdout.endswith(b"</html>"), \
        r.stderr
    out = tmp_path / "out.html"
    with open(out, "wb") as f:
        f.write(b"before\n")
        f.flush()
        r = _report_to(name, f, "--force")
    assert r.returncode == 0, r.stderr
    data = out.read_bytes()
    assert data.startswith(b"before\n<!DOCTYPE html>") and data.endswith(b"</html>")
    assert os.path.islink("/dev/stdout") and os.readlink("/dev/stdout") == "/proc/self/fd/1"
    assert sorted(os.listdir(tmp_path)) == ["out.html"]


def test_dev_null_and_dev_stderr_are_written_in_place(tmp_path):
    import subprocess

    r = _report_to("/dev/null", subprocess.PIPE)
    assert r.returncode == 0 and r.stdout == b"/dev/null\n", r.stderr
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")
    r = _report_to("/dev/stderr", subprocess.PIPE)
    assert r.returncode == 0 and b"<!DOCTYPE html>" in r.stderr and r.stdout == b"/dev/stderr\n"


def test_a_descriptor_open_on_a_store_file_is_refused(tmp_path):
    """/dev/fd/N is the caller's, but one opened on a file of the input tree is refused (exit 2, one line)."""
    import subprocess

    store = _copy(STORES["rocketmq"], tmp_path / "in" / "store")
    before = snapshot(tmp_path / "in")
    victim = store / "checkpoint"
    with open(victim, "r+b") as f:
        r = subprocess.run(["sh", "-c", 'exec "$0" -m mqtool report "$1" -o /dev/fd/3 3>>"$2"', sys.executable,
                            str(store), str(victim)], capture_output=True, timeout=120,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 2 and r.stderr.count(b"\n") == 1 and b"input tree" in r.stderr, r.stderr
    assert snapshot(tmp_path / "in") == before
    del f


def test_a_link_to_a_regular_file_keeps_the_file_rules(tmp_path, run_cli):
    """A link to a regular file outside the store is no stream: refused without --force, replaced (not written
    through) with it; the file it named is left as it was."""
    kept = tmp_path / "kept.html"
    kept.write_bytes(b"keep me")
    link = tmp_path / "r.html"
    link.symlink_to(kept)
    code, _, err = run_cli("report", STORES["rocketmq"], "-o", link)
    assert code == 2 and "exists" in err, err
    code, _, err = run_cli("report", STORES["rocketmq"], "-o", link, "--force")
    assert code == 0 and not link.is_symlink() and link.read_bytes().startswith(b"<!"), err
    assert kept.read_bytes() == b"keep me"


def test_a_link_below_the_output_root_into_the_store_is_refused_without_force(tmp_path):
    """The output directory API itself: a directory link is never entered; with force it is replaced."""
    from mqtool.errors import OutputError
    from mqtool.io import OutputDir

    store = _copy(STORES["rocketmq"], tmp_path / "in" / "store")
    before = snapshot(tmp_path / "in")
    out = tmp_path / "out"
    (out / "a").mkdir(parents=True)
    (out / "a" / "b").symlink_to(store / "consumequeue")
    with OutputDir(out, [store]) as d:
        with pytest.raises(OutputError, match="symbolic link"):
            d.write("a/b/Orders/0/x", b"data")
        with pytest.raises(OutputError, match="one plain path component"):
            d.write("a/../../in/store/x", b"data")
    with OutputDir(out, [store], force=True) as d:
        d.write("a/b/Orders/0/x", b"data")
    assert (out / "a" / "b" / "Orders" / "0" / "x").read_bytes() == b"data"
    assert not (out / "a" / "b").is_symlink()
    assert snapshot(tmp_path / "in") == before


def test_an_output_directory_that_turns_out_inside_the_store_is_refused(tmp_path):
    """The realpath re-check: a directory reached below the root is checked against the input trees
    (here the root itself is given inside the store, as an engine bug would)."""
    from mqtool.errors import OutputError
    from mqtool.io import OutputDir

    store = _copy(STORES["rocketmq"], tmp_path / "in" / "store")
    before = snapshot(tmp_path / "in")
    with pytest.raises(OutputError, match="input tree"):
        OutputDir(store / "index", [store])
    with pytest.raises(OutputError, match="input tree"):
        OutputDir(tmp_path / "in", [store])                       # contains the store
    assert snapshot(tmp_path / "in") == before


def test_moving_a_scratch_tree_in_replaces_links_only_with_force(tmp_path):
    """Spark's export output is moved in from a scratch directory the same way (no link followed)."""
    from mqtool.errors import OutputError
    from mqtool.io import OutputDir

    store = _copy(STORES["kafka"], tmp_path / "in" / "logdir")
    before = snapshot(tmp_path / "in")
    out = tmp_path / "out"
    out.mkdir()
    (out / "store=x").symlink_to(store / "fixture-0")
    for force in (False, True):
        with OutputDir(out, [store], force=force) as d:
            scratch = d.scratch_dir()
            (scratch / "store=x" / "topic=t").mkdir(parents=True)
            (scratch / "store=x" / "topic=t" / "part-0.parquet").write_bytes(b"p")
            (scratch / "_SUCCESS").write_bytes(b"")
            try:
                if not force:
                    with pytest.raises(OutputError, match="symbolic link"):
                        d.move_tree_in(scratch, skip=lambda n: n.startswith("_"))
                else:
                    d.move_tree_in(scratch, skip=lambda n: n.startswith("_"))
            finally:
                d.remove_scratch(scratch)
    assert (out / "store=x" / "topic=t" / "part-0.parquet").read_bytes() == b"p"
    assert sorted(p.name for p in out.iterdir()) == ["store=x"]
    assert snapshot(tmp_path / "in") == before
    shutil.rmtree(out)


def test_handoff_pieces_are_private_and_never_follow_a_link(tmp_path):
    """mqtool.io.Handoff (where Spark range tasks on the driver's machine leave their tables): a task uses it
    only when it reads the driver's token there; a piece is taken once (removed as it is mapped), only under
    a plain name it was given, of the size announced, never through a link; a task's (unpickled) copy never
    removes the directory, the driver's close does."""
    import pickle

    from mqtool.io import Handoff

    h = Handoff()
    d = Path(h.dir)
    assert (d.stat().st_mode & 0o777) == 0o700
    away = pickle.loads(pickle.dumps(h))
    assert away.reachable()
    name = away.put("xref-3", b"table bytes")
    assert name.startswith("xref-3-") and away.put("xref-3", b"table bytes") != name    # a retry: a new name
    assert bytes(h.take(name, 11)) == b"table bytes" and not (d / name).exists()
    assert h.take(name, 11) is None                                 # taken once
    for bad in ("token", "../x", "", "."):
        assert h.take(bad, 1) is None
    secret = tmp_path / "secret"
    secret.write_bytes(b"not a table")
    os.symlink(secret, d / "xref-9-link")
    assert h.take("xref-9-link", len(b"not a table")) is None      # a planted link is not followed
    assert secret.read_bytes() == b"not a table"
    other = away.put("xref-4", b"1234")
    assert h.take(other, 5) is None                                 # not the size the task announced
    stranger = pickle.loads(pickle.dumps(h))
    stranger.token = "another machine's"
    assert not stranger.reachable() and stranger.put("xref-5", b"x") is None
    away.close()
    assert d.is_dir()
    h.close()
    assert not d.exists()


_SPOOL_CHILD = """
import sys, time
from mqtool.io import Handoff, Spool, write_piece
sp = Handoff() if sys.argv[1] == "handoff" else Spool()
write_piece(sp.piece(0), [b"half of a run's output"])
print(sp.dir, flush=True)
time.sleep(600)
"""


def _spool_of_child(tmp_path, kind="spool"):
    """A child process that made a spool (in ``tmp_path``, its TMPDIR) and waits: (process, directory)."""
    import subprocess

    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, "-c", _SPOOL_CHILD, kind], stdout=subprocess.PIPE, env=env, text=True)
    d = Path(p.stdout.readline().strip())
    assert d.parent == tmp_path and d.is_dir() and d.name.startswith(f".mqtool-tmp-spool-{p.pid}-")
    return p, d


def _age(path: Path, seconds: float = 3600) -> None:
    import time

    os.utime(path, (time.time() - seconds, time.time() - seconds), follow_symlinks=False)


@pytest.mark.parametrize("kind", ["spool", "handoff"])
def test_a_killed_runs_spool_is_removed_by_the_next_run_and_a_live_ones_is_kept(tmp_path, monkeypatch, kind):
    """A run killed with SIGKILL leaves its spool directory; the next run that makes a spool removes it (its
    process is gone and nobody holds its lock). A live run's directory -- however old -- stays, as does one
    too young to judge, a link named like a spool (never followed), another user's, and one of an earlier
    version (no pid in its name)."""
    import signal
    import tempfile

    from mqtool.io import Spool

    live, live_dir = _spool_of_child(tmp_path, kind)
    dead, dead_dir = _spool_of_child(tmp_path, kind)
    young, young_dir = _spool_of_child(tmp_path, kind)
    for p in (dead, young):
        p.send_signal(signal.SIGKILL)
        p.wait()
    target = tmp_path / "keep"
    target.mkdir()
    (target / "file").write_bytes(b"x")
    link = tmp_path / f".mqtool-tmp-spool-{dead.pid}-link"
    link.symlink_to(target, target_is_directory=True)
    legacy = tmp_path / ".mqtool-tmp-spool-abc123"
    legacy.mkdir()
    others = tmp_path / f".mqtool-tmp-spool-{dead.pid}-other"
    others.mkdir()
    if os.geteuid() == 0:
        os.chown(others, 65534, 65534)
    for d in (live_dir, dead_dir, link, legacy, others):
        _age(d)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    try:
        with Spool() as sp:
            mine = Path(sp.dir)
            assert mine.name.startswith(f".mqtool-tmp-spool-{os.getpid()}-")
            assert not dead_dir.exists()                                         # the killed run's
            assert (live_dir / "000000000").read_bytes() == b"half of a run's output"
            assert young_dir.is_dir() and legacy.is_dir() and link.is_symlink() and (target / "file").exists()
            assert others.is_dir() or os.geteuid() != 0
        assert not mine.exists()
    finally:
        live.kill()
        live.wait()
    _age(live_dir)
    _age(young_dir)
    from mqtool.io import sweep_dead_spools

    assert sorted(sweep_dead_spools(str(tmp_path))) == sorted([live_dir.name, young_dir.name])
    assert legacy.is_dir() and link.is_symlink() and (target / "file").exists()


def test_a_spool_held_by_a_surviving_worker_is_kept(tmp_path):
    """The spool's lock is held by every process forked while it is open: a worker that outlives its killed
    parent keeps the directory (the lock is what tells; the parent's pid is gone)."""
    import subprocess
    import signal

    from mqtool.io import sweep_dead_spools

    code = ("import os, sys, time\nfrom mqtool.io import Spool\nsp = Spool()\n"
            "if os.fork() == 0:\n    time.sleep(600)\n    os._exit(0)\nprint(sp.dir, flush=True)\ntime.sleep(600)\n")
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env, text=True,
                         start_new_session=True)
    d = Path(p.stdout.readline().strip())
    p.send_signal(signal.SIGKILL)
    p.wait()
    _age(d)
    try:
        assert sweep_dead_spools(str(tmp_path)) == [] and d.is_dir()       # the forked worker still holds it
    finally:
        os.killpg(p.pid, signal.SIGKILL)                                      # the worker (same session)
    import time

    for _ in range(100):
        if sweep_dead_spools(str(tmp_path)):
            break
        time.sleep(0.05)
    assert not d.exists()


@pytest.mark.parametrize("env", [{}, {"TMPDIR": "{tmp}"}, {"TMPDIR": "{tmp}/missing", "TMP": "{tmp}"},
                                 {"TMPDIR": "{tmp}/ro"}, {"TEMP": "{tmp}/file"}])
def test_temp_dir_is_tempfiles_without_importing_it(tmp_path, env):
    """mqtool.io.temp_dir() names the directory tempfile.gettempdir() does (its candidates in its order, the first
    this process may create files in: a missing TMPDIR, a read-only one, a file are passed over), and leaves
    tempfile unloaded; each case in a fresh interpreter (tempfile caches its answer)."""
    import subprocess

    (tmp_path / "ro").mkdir(mode=0o555)
    (tmp_path / "file").write_bytes(b"")
    clean = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
    clean.update({k: v.format(tmp=tmp_path) for k, v in env.items()}, PYTHONPATH=str(ROOT))
    code = ("import sys; from mqtool.io import temp_dir; ours = temp_dir(); loaded = 'tempfile' in sys.modules; "
            "import tempfile; print(ours == tempfile.gettempdir(), loaded)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean, timeout=60)
    assert r.stdout.split() == ["True", "False"], r.stderr
