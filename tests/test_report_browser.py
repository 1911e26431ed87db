"""Render the HTML report in headless Chromium with name resolution disabled (skipped without Chromium).

Checks that the page loads offline, that the browser's DOM has the charts and findings rows, and that a
screenshot is produced (the screenshot itself is for people: MQTOOL_KEEP_SCREENSHOT=DIR keeps it).
"""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import FIXTURES

FIXTURE_STORE = FIXTURES / "rocketmq" / "store"


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def _run(browser, tmp_path, *args):
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
           f"--user-data-dir={tmp_path / 'profile'}", "--host-resolver-rules=MAP * ~NOTFOUND", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(_chromium() is None, reason="Chromium not installed")
def test_report_renders_in_chromium(run_cli, tmp_path):
    out = tmp_path / "report.html"
    code, _, err = run_cli("report", FIXTURE_STORE, "-o", out)
    assert code == 0, err
    browser = _chromium()
    r = _run(browser, tmp_path, "--dump-dom", out.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert 'id="timeline-chart"' in dom and 'id="topic-chart"' in dom and 'id="findings"' in dom
    assert "Where the damage lies" in dom
    shot = tmp_path / "report.png"
    r = _run(browser, tmp_path, "--window-size=1280,2200", f"--screenshot={shot}", out.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 60_000      # a blank page of this size is ~13 KB
    keep = os.environ.get("MQTOOL_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)
