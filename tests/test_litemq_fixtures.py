"""The fixture stores built by fixtures/build_litemq.py: reproducible, and read back as written."""
from __future__ import annotations

import json

from builders import litemq_builder
from conftest import FIXTURES

FIX = FIXTURES / "litemq"


_builder = litemq_builder


def _tree(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _rows(out):
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def test_fixtures_are_reproducible(tmp_path):
    out = _builder().main(str(tmp_path / "litemq"))
    assert _tree(out) == _tree(FIX)


def test_fixture_store_reads_back(run_cli):
    man = json.loads((FIX / "messages.json").read_text())
    code, out, err = run_cli("dump", "commitlog", FIX / "store", "--json")
    assert code == 0, err
    rows = _rows(out)
    assert [(r["offset"], r["size"], r["msg_id"], r["topic"], r["queue_id"], r["tags"], r["keys"],
             r["properties"], r["body_size"], r["message_type_code"], r["store_timestamp"]) for r in rows] == \
        [(m["offset"], m["size"], m["msg_id"], m["topic"], m["queue_id"], m["tags"], m["keys"],
          dict(sorted(m["properties"].items())), m["body_size"], m["message_type_code"], m["store_timestamp"])
         for m in sorted(man["store"], key=lambda m: m["offset"])]
    code, out, _ = run_cli("verify", "store", FIX / "store", "--json")
    assert code == 0 and json.loads(out.splitlines()[-1])["verdict"] == "sound"
    code, out, _ = run_cli("rebuild-index", FIX / "store", "--compare", "--cq-file-size", man["cq_file_size"])
    assert code == 0


def test_fixture_restarted_stale(run_cli):
    man = json.loads((FIX / "messages.json").read_text())
    code, out, _ = run_cli("dump", "commitlog", FIX / "restarted", "--json", "--include-stale")
    rows = _rows(out)
    live = [r for r in rows if not r["stale"]]
    assert [r["msg_id"] for r in live] == [m["msg_id"] for m in man["restarted_new"]]
    stale = {(r["offset"], r["msg_id"]) for r in rows if r["stale"]}
    end = man["restarted_new_end"]
    want = {(m["offset"], m["msg_id"]) for m in man["store"] if m["offset"] >= end}
    # every old record starting at or after the new end is carved (the one the new data ends inside is gone)
    assert stale == want and len(want) == 8
    code, out, _ = run_cli("verify", "store", FIX / "restarted", "--json")
    s = json.loads(out.splitlines()[-1])
    assert s["errors"] == 0 and s["stale_records"] == len(stale) and s["unclean_shutdown"] is True


def test_salvage_out(run_cli, tmp_path):
    dst = tmp_path / "salvage.ndjson"
    code, out, _ = run_cli("verify", "commitlog", FIX / "restarted", "--json", "--salvage-out", dst)
    rows = _rows(dst.read_text())
    assert len(rows) == 3 + json.loads(out.splitlines()[-1])["stale_records"]
    assert all("body" in r for r in rows)


def test_no_config_part(run_cli):
    code, _, err = run_cli("dump", "config", FIX / "store")
    assert code == 2 and "LiteMQ" in err
