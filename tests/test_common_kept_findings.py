"""verify's terminal views order findings only after the last one came (roots by severity, each with its
consequences; tables by severity): :class:`mqtool.findings.KeptFindings` holds them in memory up to a limit and
past it on disk (a scratch SQLite database in a spool directory), so memory does not grow with their number.
Both give the orders of a plain model: a stable sort by severity, consequences after their root in arrival
order."""
from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool import findings as FM
from mqtool import render
from mqtool.findings import Finding, KeptFindings

RANK = {"error": 0, "warning": 1, "info": 2}.get


@st.composite
def finding_runs(draw):
    """Findings in arrival order: ids F1..Fn (some None), each a root or following an earlier root (or an id
    no finding has)."""
    out, roots = [], []
    for i in range(draw(st.integers(0, 60))):
        fid = None if draw(st.integers(0, 9)) == 0 else f"F{i + 1}"
        cause = None
        pick = draw(st.integers(0, 3))
        if pick == 1 and roots:
            cause = draw(st.sampled_from(roots))
        elif pick == 2:
            cause = "F999999"
        sev, code = draw(st.sampled_from([("error", "crc-mismatch"), ("warning", "queue-offset-gap"),
                                          ("info", "zero-fill")]))
        f = Finding(sev, code, f"/s/f{i % 3}",
                    i, i * 7, f"message {i}", expected={"n": i} if i % 5 == 0 else None, actual=b"x" if i % 7 == 0
                    else None, span=(i, i + 1) if i % 2 else None, id=fid, caused_by=cause)
        if cause is None and fid is not None:
            roots.append(fid)
        out.append(f)
    return out


def model_roots(found, consequences):
    rank = lambda f: RANK(f.severity, 3)                   # noqa: E731
    out = []
    for r in sorted((f for f in found if f.caused_by is None), key=rank):
        out.append((r, True))
        if consequences:
            out += [(c, False) for c in found if c.caused_by is not None and c.caused_by == r.id]
    return out


@settings(max_examples=150, deadline=None)
@given(found=finding_runs(), limit=st.sampled_from([0, 1, 5, 10_000]))
def test_orders_equal_the_model_in_memory_and_on_disk(found, limit):
    with KeptFindings(lambda sev: RANK(sev, 3), limit).extend(found) as kept:
        assert kept.count == len(found) and len(kept.mem) <= limit
        assert list(kept.by_severity()) == sorted(found, key=lambda f: RANK(f.severity, 3))
        assert list(kept.roots()) == model_roots(found, False)
        assert list(kept.roots(consequences=True)) == model_roots(found, True)


def test_the_spill_directory_goes_with_the_view(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))         # (the spool's directory: under TMPDIR)
    found = [Finding("error", "crc-mismatch", "/s/f", i, i, f"m{i}", id=f"F{i + 1}") for i in range(30)]
    kept = KeptFindings(lambda sev: 0, 10).extend(found)
    assert kept.mem == [] and len(os.listdir(tmp_path)) == 1          # everything moved to the spool
    assert list(kept.by_severity()) == found
    kept.close()
    assert os.listdir(tmp_path) == []


def test_terminal_views_are_the_same_when_spilled(run_cli, tmp_path, monkeypatch):
    """verify's compact view (with and without --all-findings) and table view print the same whether the
    findings stayed in memory or went to disk."""
    from builders import damage_segments
    from conftest import rocketmq_store_copy

    store = rocketmq_store_copy(tmp_path)
    damage_segments(store)
    monkeypatch.setattr(render, "stdout_is_tty", lambda: True)
    for extra in ([], ["--all-findings"], ["--table"]):
        args = ["--no-color", "-q", "verify", "store", store, *extra]
        monkeypatch.setattr(FM, "KEPT_IN_MEMORY", 1 << 30)
        want = run_cli(*args)
        monkeypatch.setattr(FM, "KEPT_IN_MEMORY", 2)
        got = run_cli(*args)
        assert got == want and want[0] == 1 and want[1].count("error[") + want[1].count("error ") > 2, extra


def test_compact_view_lists_a_few_roots_of_each_code_and_counts_the_rest(monkeypatch):
    """At most ROOTS_SHOWN_PER_CODE roots of one severity and code are listed (the first ones, in order), then
    one line per code counts the others; their consequences are counted with the rest. --all-findings lists
    every one. (Expected lines written out by hand.)"""
    import io

    from rich.console import Console

    monkeypatch.setattr(render, "ROOTS_SHOWN_PER_CODE", 2)
    found = [Finding("error", "crc-mismatch", "/s/f", i, i, f"bad {i}", id=f"F{i + 1}") for i in range(5)]
    found += [Finding("warning", "queue-offset-gap", "/s/q", 9, 9, "gap", id="F6"),
              Finding("error", "cq-dangling", "/s/q", 10, 10, "dangling", id="F7", caused_by="F4")]
    consequences = {"F4": 1}

    def shown(all_findings):
        out = io.StringIO()
        with KeptFindings(lambda sev: RANK(sev, 3)).extend(found) as kept:
            render._findings_compact(Console(file=out, width=200), kept, consequences, all_findings, "/s")
        return out.getvalue().splitlines()

    assert shown(False) == [
        "f:0: error[crc-mismatch] bad 0",
        "f:1: error[crc-mismatch] bad 1",
        "q:9: warning[queue-offset-gap] gap",
        "(3 more error[crc-mismatch] findings like those above are not shown: --all-findings lists them, --json "
        "gives every finding)",
        "(1 finding that follows from those above is not shown: --all-findings lists it, --json gives every "
        "finding)"]
    every = shown(True)
    assert [line.split()[0] for line in every] == ["f:0:", "f:1:", "f:2:", "f:3:", "q:10:", "f:4:", "q:9:"]
    assert every[4].startswith("    q:10: error[cq-dangling]")
    assert every[3] == "f:3: error[crc-mismatch] bad 3 (and 1 consequence)" and "more" not in " ".join(every)
