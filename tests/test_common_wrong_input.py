"""Wrong input gets an answer: the wrong family, empty or unrecognised directories, impossible ranges and
filters that match nothing are never met with silence and exit 0."""
from __future__ import annotations

import datetime
import json
import os

import pytest

from conftest import FIXTURES

RMQ = FIXTURES / "rocketmq" / "store"
KAFKA = FIXTURES / "kafka" / "logdir"
LITEMQ = FIXTURES / "litemq" / "store"


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("args, family", [
    (("dump", "kafka", RMQ), "RocketMQ"),
    (("dump", "commitlog", RMQ, "--format", "kafka"), "RocketMQ"),
    (("info", KAFKA, "--format", "rocketmq"), "Kafka"),
    (("verify", "store", KAFKA, "--format", "litemq"), "Kafka"),
    (("dump", "consumequeue", KAFKA), None),        # a RocketMQ/LiteMQ part asked of a Kafka store
])
def test_wrong_family_is_a_usage_error_naming_what_it_looks_like(run_cli, args, family):
    code, out, err = run_cli(*args, "--json")
    assert code == 2 and out == ""
    line = _one_line(err)
    if family:
        assert f"looks like a {family} store" in line


@pytest.mark.parametrize("verb", [("dump", "kafka"), ("dump", "commitlog"), ("info",), ("verify", "store")])
def test_empty_and_unrecognised_directories(run_cli, tmp_path, verb):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(*verb, empty, "--json")
    assert code == 2 and "empty directory" in _one_line(err)
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "a").write_bytes(os.urandom(3000))
    (junk / "b.bin").write_bytes(os.urandom(3000))
    code, _, err = run_cli(*verb, junk, "--json")
    assert code == 2 and str(junk) in _one_line(err)


def test_report_on_a_non_store_says_so(run_cli, tmp_path):
    f = tmp_path / "rand.bin"
    f.write_bytes(os.urandom(5000))
    code, _, err = run_cli("report", f, "-o", tmp_path / "x.html")
    assert code == 2 and "not a RocketMQ, LiteMQ or Kafka store" in _one_line(err)


@pytest.mark.parametrize("args", [
    ("dump", "commitlog", RMQ, "--limit", "-1"),
    ("dump", "consumequeue", RMQ, "--limit", "-5"),
    ("dump", "kafka", KAFKA, "--limit", "-1"),
    ("dump", "commitlog", RMQ, "--from-offset", "1000", "--to-offset", "10"),
    ("dump", "commitlog", RMQ, "--from-offset", "10", "--to-offset", "10"),
])
def test_impossible_values_are_usage_errors(run_cli, args):
    code, out, err = run_cli(*args, "--json")
    assert code == 2 and out == "" and "Invalid value" in err


@pytest.mark.parametrize("args", [
    ("dump", "commitlog", RMQ, "--topic", "NoSuchTopic"),
    ("dump", "commitlog", RMQ, "--key", "no-such-key"),
    ("dump", "commitlog", RMQ, "--from-offset", "999999999"),
    ("dump", "consumequeue", RMQ, "--queue", "99"),
    ("dump", "commitlog", LITEMQ, "--topic", "NoSuchTopic"),
])
def test_filters_that_match_nothing_exit_1_with_a_note(run_cli, args):
    code, out, err = run_cli(*args, "--json")
    assert code == 1 and out == ""
    assert _one_line(err).startswith("mqtool: nothing matched --")


def test_a_matching_filter_stays_clean(run_cli):
    """The control: a filter that matches exits 0 and prints only matching rows."""
    import json

    code, out, err = run_cli("dump", "commitlog", RMQ, "--topic", "Orders", "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and rows and {r["topic"] for r in rows} == {"Orders"}


def test_forcing_a_family_on_one_damaged_file_is_still_obeyed(run_cli, tmp_path):
    seg = tmp_path / "00000000000000000000"
    seg.write_bytes(b"\xab" * 4096)
    code, _, err = run_cli("dump", "commitlog", seg, "--format", "rocketmq", "--json")
    assert code in (0, 1) and "Traceback" not in err


def _times(run_cli, *args):
    code, out, err = run_cli(*args, "--json")
    assert code == 0, err
    return [json.loads(x) for x in out.splitlines()]


@pytest.mark.parametrize("args, field", [
    (("dump", "commitlog", RMQ), "store_timestamp"),
    (("dump", "commitlog", LITEMQ), "store_timestamp"),
    (("dump", "kafka", KAFKA, "--deep"), "timestamp"),
])
def test_since_until_for_every_family(run_cli, args, field):
    every = [r for r in _times(run_cli, *args) if isinstance(r.get(field), int)]
    times = sorted({r[field] for r in every})
    assert len(times) >= 3
    lo, hi = times[1], times[-1]
    want = [r for r in every if lo <= r[field] < hi]
    got = _times(run_cli, *args, "--since", str(lo), "--until", str(hi), "--jobs", "1")
    assert got == want and 0 < len(got) < len(every)
    iso = datetime.datetime.fromtimestamp(lo / 1000, tz=datetime.timezone.utc).isoformat()
    assert _times(run_cli, *args, "--since", iso, "--until", str(hi)) == want
    code, out, err = run_cli(*args, "--since", str(times[-1] + 1), "--json")
    assert code == 1 and out == "" and "nothing matched" in err
    code, _, err = run_cli(*args, "--since", str(hi), "--until", str(lo))
    assert code == 2 and "Invalid value" in err
