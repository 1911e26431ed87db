"""mqtool report: one self-contained HTML file. Structure checked with the stdlib HTML parser (no browser)."""
from __future__ import annotations

import json
import shutil

from conftest import FIXTURES, require_realdata
from pagecheck import assert_self_contained, parse

FIXTURE_STORE = FIXTURES / "rocketmq" / "store"


def _damaged_copy(tmp_path):
    src = require_realdata("rocketmq", "gen-5.1.4-kill", "store")
    dst = tmp_path / "store"
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    seg = dst / "commitlog" / "00000000000000065536"
    data = bytearray(seg.read_bytes())
    data[20_000:20_400] = b"\xAB" * 400
    seg.write_bytes(bytes(data))
    return dst, seg


def test_report_of_a_damaged_store(run_cli, tmp_path):
    store, seg = _damaged_copy(tmp_path)
    out = tmp_path / "out" / "report.html"
    code, stdout, err = run_cli("report", store, "-o", out)
    assert code == 1, err
    assert stdout.strip() == str(out)
    html = out.read_text("utf-8")
    page = parse(html)
    assert_self_contained(html, page)
    # sections and charts
    for ident in ("overview", "timeline", "topics", "damage", "files", "findings", "timeline-chart",
                  "topic-chart", "findings-table", "verdict"):
        assert ident in page.ids, ident
    assert page.count("svg") >= 3
    assert page.count("rect", **{"class": "damaged-bucket"}) >= 1
    assert page.count("rect", **{"class": "damage-mark"}) >= 1
    # the verify findings: one row per root finding, its consequences folded under it, as `verify store --json`
    # links them; the damaged-ranges tile says what the verify summary says
    code_v, out_v, _ = run_cli("verify", "store", store, "--json")
    rows = [json.loads(x) for x in out_v.splitlines()]
    findings = [r for r in rows if r["kind"] == "finding"]
    roots = [f for f in findings if f["caused_by"] is None]
    summary = rows[-1]
    assert page.count("tr", **{"class": "finding"}) == len(roots)
    assert page.count("tr", **{"class": "finding", "data-severity": "error"}) == \
        sum(1 for f in roots if f["severity"] == "error") > 0
    assert page.count("tr", **{"class": "finding"}) + page.count("tr", **{"class": "consequence"}) == len(findings)
    assert summary["damaged_ranges"] >= 1
    assert f"damaged ranges{summary['damaged_ranges']} (" in "".join(page.text)
    text = "".join(page.text)
    assert "bad-length-field" in text or "bad-magic" in text
    assert "damaged" in text and "UNCLEAN" in text
    # where: the damaged segment is named with the position the scanner resynced from
    assert str(seg) in html
    # topic bars: one per topic with bytes
    code_i, out_i, _ = run_cli("info", store, "--json")
    info = json.loads(out_i)
    assert page.count("rect", **{"class": "topic-bar"}) == len([t for t in info["topics"] if t["bytes"]])
    assert "--salvage-out" in err
    # next to the store (its parent directory) is fine; inside it, or onto a directory, is not
    code, _, err = run_cli("report", store, "-o", tmp_path / "next-to-store.html")
    assert code == 1 and (tmp_path / "next-to-store.html").exists(), err
    code, _, err = run_cli("report", store, "-o", tmp_path)
    assert code == 2 and "directory" in err


def test_report_of_a_sound_store_and_output_rules(run_cli, tmp_path):
    out = tmp_path / "r.html"
    code, stdout, err = run_cli("report", FIXTURE_STORE, "-o", out)
    assert code == 0, err
    html = out.read_text("utf-8")
    page = parse(html)
    assert_self_contained(html, page)
    _, out_v, _ = run_cli("verify", "store", FIXTURE_STORE, "--json")
    findings = [json.loads(x) for x in out_v.splitlines()][:-1]
    assert page.count("tr", **{"class": "finding"}) == len(findings)
    if not findings:
        assert "no-findings" in page.ids
    assert page.count("tr", **{"class": "finding", "data-severity": "error"}) == 0
    assert "no-damage" in page.ids
    # an existing file is kept unless --force
    code, _, err = run_cli("report", FIXTURE_STORE, "-o", out)
    assert code == 2 and "--force" in err
    code, _, err = run_cli("report", FIXTURE_STORE, "-o", out, "--force")
    assert code == 0, err
    # never inside the store
    code, _, err = run_cli("report", FIXTURE_STORE, "-o", FIXTURE_STORE / "report.html")
    assert code == 2 and "input tree" in err
    assert not (FIXTURE_STORE / "report.html").exists()


def test_store_text_is_escaped(tmp_path):
    from mqtool.findings import Finding, Summary
    from mqtool.info import InfoBuilder
    from mqtool.render_html import render_report

    b = InfoBuilder("rocketmq", "/s")
    evil = '<script>alert(1)</script>"&'
    b.add_message(evil, 0, 1_795_338_000_000, 10)
    b.note(evil)
    info = b.finish()
    s = Summary()
    f = Finding("error", "bad-magic", "/s/" + evil, 1, 1, evil, evil, evil)
    s.add(f)
    html = render_report(info, [f], s, {})
    assert "<script>" not in html and "&lt;script&gt;" in html
    page = parse(html)
    assert_self_contained(html, page)


def test_large_inputs_stay_bounded():
    from mqtool.findings import Summary
    from mqtool.info import InfoBuilder
    from mqtool.options import InfoOptions
    from mqtool.render_html import MAX_SVG_BUCKETS, MAX_TABLE_ROWS, render_report

    b = InfoBuilder("rocketmq", "/s")
    t0 = 1_795_338_000_000
    for i in range(5000):
        b.add_message(f"%LMQ%q{i}", 0, t0 + i * 1000, 100)
    b.add_damage("seg", 5, 5, 10, "bad-magic", "x")
    b.add_message("T", 0, t0 + 5_000_000, 100)
    info = b.finish(InfoOptions(bucket_ms=1000))          # 5001 one-second buckets
    html = render_report(info, [], Summary(), {})
    page = parse(html)
    assert_self_contained(html, page)
    bars = page.count("rect", **{"class": "bar"})
    assert 0 < bars <= MAX_SVG_BUCKETS
    # the damage lies between the messages at t0+4999 s and t0+5000 s: 1-second buckets 4999 and 5000, which
    # fall into drawn bars 1249 and 1250 when 4 buckets are merged per bar (5001 / 1500 → 4)
    assert page.count("rect", **{"class": "damaged-bucket"}) == 2
    assert page.count("tr", **{"class": "topic-row"}) == MAX_TABLE_ROWS
    assert "more topics" in html
