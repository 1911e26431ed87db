"""Render the HTML report in headless Chromium (name resolution disabled), at a laptop and a phone width.

Checks that the page loads offline without console messages, that the browser's DOM has the charts and the
findings, that the page fits the viewport's width, and that a screenshot is not blank. Skipped without
Chromium, except under CI=true, where .ci/run installs Debian's chromium and a missing browser fails the run.
MQTOOL_KEEP_SCREENSHOT=DIR keeps the screenshots for people to look at.
"""
from __future__ import annotations

import os
import re
import shutil

import pytest

from conftest import FIXTURES
from pagecheck import console_messages, require_chromium, run_chromium as _run

FIXTURE_STORE = FIXTURES / "rocketmq" / "store"
WIDTHS = {"laptop": (1280, 2200), "phone": (390, 2400)}
# Measures the laid-out page and writes the numbers into the DOM, where --dump-dom can read them.
_PROBE = ("<script>window.addEventListener('load', function () {"
          "document.body.setAttribute('data-probe', document.documentElement.scrollWidth + 'x' + window.innerWidth"
          " + 'x' + document.querySelectorAll('svg rect').length);});</script>")


def _distinct_colours(png) -> int:
    from PIL import Image

    with Image.open(png) as im:
        colours = im.convert("RGB").getcolors(maxcolors=1 << 16)
    return len(colours) if colours is not None else 1 << 16


def test_console_messages_are_seen(tmp_path):
    """The control for the console check: a page that logs and throws is caught."""
    browser = require_chromium()
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>console.error('x'); notDefined();</script></body></html>")
    r = _run(browser, tmp_path, "--dump-dom", page.as_uri())
    assert len(console_messages(r.stderr)) == 2


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_report_renders_in_chromium(run_cli, tmp_path, width):
    browser = require_chromium()
    out = tmp_path / "report.html"
    code, _, err = run_cli("report", FIXTURE_STORE, "-o", out)
    assert code == 0, err
    w, h = WIDTHS[width]
    probed = tmp_path / "probed.html"
    probed.write_text(out.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    r = _run(browser, tmp_path, f"--window-size={w},{h}", "--dump-dom", probed.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert 'id="timeline-chart"' in dom and 'id="topic-chart"' in dom and 'id="findings"' in dom
    assert "Where the damage lies" in dom
    m = re.search(r'data-probe="(\d+)x(\d+)x(\d+)"', dom)
    assert m, "the probe script did not run"
    scroll_width, inner_width, rects = map(int, m.groups())
    assert scroll_width <= inner_width, f"page is {scroll_width}px wide in a {inner_width}px viewport"
    assert rects >= 10                                     # the charts' bars were laid out
    r = _run(browser, tmp_path, "--dump-dom", out.as_uri())
    assert console_messages(r.stderr) == []
    shot = tmp_path / f"report-{width}.png"
    r = _run(browser, tmp_path, f"--window-size={w},{h}", f"--screenshot={shot}", out.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _distinct_colours(shot) >= 50                   # a blank or one-colour page has a handful
    keep = os.environ.get("MQTOOL_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)
