"""A RocketMQ store whose commitlog holds no message yet (issue-less defect of earlier sessions).

A fresh broker leaves ``commitlog/`` with no file, or with a pre-allocated all-zero one (see the 4.9.7/5.1.4
``-kill`` stores of shared/realdata/rocketmq/MANIFEST.md: "a 6th, all-zero pre-allocated file"), next to
``config/`` and ``consumequeue/``. It was "not a RocketMQ, LiteMQ or Kafka store directory" (exit 2); now it
is a RocketMQ store with 0 messages: ``dump`` prints nothing (exit 0), ``info`` says 0 messages, ``verify
store`` is clean when the queues are empty too, and a queue unit pointing into a commitlog without data is an
error finding (exit 1).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from formats import rocketmq as F
from mqtool.detect import detect


def _root(tmp_path: Path, commitlog: dict[str, bytes | int], units: list[tuple[int, int]] = ()) -> Path:
    """A store root: ``commitlog`` maps a segment name to its bytes, or to a size (a sparse all-zero file, as
    a broker pre-allocates it); ``units`` (offset, size) go to consumequeue/T/0 (built by ``F.CqUnit``)."""
    root = tmp_path / "store"
    (root / "commitlog").mkdir(parents=True)
    (root / "config").mkdir()
    (root / "config" / "topics.json").write_text('{"topicConfigTable":{}}')
    (root / "consumequeue").mkdir()
    for name, content in commitlog.items():
        with open(root / "commitlog" / name, "wb") as f:
            if isinstance(content, int):
                f.truncate(content)
            else:
                f.write(content)
    if units:
        (root / "consumequeue" / "T" / "0").mkdir(parents=True)
        (root / "consumequeue" / "T" / "0" / ("0" * 20)).write_bytes(
            b"".join(F.CqUnit.build(dict(offset=o, size=s, tagsCode=0)) for o, s in units))
    return root


FRESH = {"no file": {}, "a 0-byte file": {"0" * 20: b""},
         "pre-allocated zeros": {"0" * 20: 1 << 20}}


@pytest.mark.parametrize("segments", list(FRESH.values()), ids=list(FRESH))
def test_a_fresh_store_is_a_rocketmq_store_with_no_message(tmp_path, run_cli, segments):
    root = _root(tmp_path, segments)
    assert detect(root) == "rocketmq"
    assert detect(root / "commitlog") == "rocketmq"
    code, out, err = run_cli("dump", "commitlog", root, "--json")
    assert (code, out, err) == (0, "", "")
    code, out, err = run_cli("verify", "store", root, "--json")
    summary = json.loads(out.splitlines()[-1])
    assert code == 0 and summary["verdict"] == "sound" and summary["errors"] == summary["warnings"] == 0, out
    code, out, err = run_cli("info", root, "--json")
    assert code == 0 and json.loads(out)["messages"] == 0, err


@pytest.mark.parametrize("segments", [{}, {"0" * 20: 1 << 20}], ids=["no file", "pre-allocated zeros"])
def test_queue_units_into_a_commitlog_without_data_are_findings(tmp_path, run_cli, segments):
    root = _root(tmp_path, segments, units=[(0, 100), (100, 120)])
    code, out, err = run_cli("verify", "store", root, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    bad = [r for r in rows if r["kind"] == "finding" and r["severity"] == "error" and r["code"].startswith("cq-")]
    assert code == 1 and [r["position"] for r in bad] == [0, 20], out


def test_a_litemq_layout_with_an_empty_commitlog_is_not_taken_for_rocketmq(tmp_path):
    from mqtool.rocketmq.store import sniff

    root = _root(tmp_path, {})
    (root / "checkpoint").mkdir()            # LiteMQ keeps checkpoint/checkpoint
    assert sniff(root) == 0
    bare = tmp_path / "bare"
    (bare / "commitlog").mkdir(parents=True)  # nothing but an empty commitlog/: no evidence of any family
    assert sniff(bare) == 0
