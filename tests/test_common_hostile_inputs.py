"""Named regressions of hostile inputs found by adversarial testing (session 7): each failed before its fix.
The generative harness over mutated stores is tests/test_common_hostile_generative.py."""
from __future__ import annotations

import json
import shutil

from conftest import FIXTURES


def _rows(out: str) -> list[dict]:
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def test_hash_of_a_symlink_loop_is_an_unreadable_entry(tmp_path, run_cli):
    """`hash LOOP` raised RuntimeError from Path.resolve() (a traceback); it lists the loop as unreadable."""
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    code, out, err = run_cli("hash", loop, "--json")
    rows = _rows(out)
    assert code == 1, err
    assert [(r["path"], r["type"]) for r in rows if r["kind"] == "manifest_entry"] == [("loop", "unreadable")]
    assert rows[-1]["kind"] == "manifest" and rows[-1]["unhashed"] == 1


def test_litemq_commitlog_directory_that_is_a_symlink(tmp_path, run_cli):
    """A LiteMQ data directory whose commitlog/ is a symlink to another disk, given as the path: it was
    'not in the subpath' (exit 2, Path.relative_to's message); it is the store's commitlog, as through the
    root."""
    store = shutil.copytree(FIXTURES / "litemq" / "store", tmp_path / "data")
    elsewhere = tmp_path / "disk2" / "commitlog"
    elsewhere.parent.mkdir()
    shutil.move(store / "commitlog", elsewhere)
    (store / "commitlog").symlink_to(elsewhere)
    code, via_root, err = run_cli("dump", "commitlog", store, "--json")
    assert code == 0, err
    code, via_link, err = run_cli("dump", "commitlog", store / "commitlog", "--json")
    assert code == 0, err
    assert _rows(via_link) == _rows(via_root) and len(_rows(via_root)) > 0
