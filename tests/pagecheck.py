"""Checks of the HTML report shared by its tests: the page's structure with the stdlib parser (no browser), that
it is self-contained, and a headless Chromium run (offline) with its console messages."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest


class _Page(HTMLParser):
    """Collects tags, attributes and element counts; fails on nothing (HTMLParser is lenient)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.stack: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if "id" in a:
            assert a["id"] not in self.ids, f"duplicate id {a['id']}"
            self.ids.add(a["id"])

    def handle_data(self, data):
        self.text.append(data)

    def count(self, tag, **attrs):
        return sum(1 for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items()))


def parse(html: str) -> _Page:
    p = _Page()
    p.feed(html)
    p.close()
    return p


def assert_self_contained(html: str, page: _Page):
    # no URL of any scheme that a browser would fetch, no script, no external stylesheet / image / font
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/|url\(", html, re.I)
    for tag, a in page.tags:
        assert tag not in ("script", "link", "img", "iframe", "object", "embed"), tag
        for k in ("src", "href", "xlink:href", "srcset", "action"):
            assert k not in a, (tag, k)
    assert page.count("meta", charset="utf-8") == 1


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def require_chromium():
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("Chromium not installed (.ci/run installs Debian's chromium)")
        pytest.skip("Chromium not installed")
    return browser


def run_chromium(browser, tmp_path, *args):
    """Chromium headless, offline (every host name unresolvable), with a profile under tmp_path."""
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
           "--enable-logging=stderr", "--v=0",
           f"--user-data-dir={tmp_path / 'profile'}", "--host-resolver-rules=MAP * ~NOTFOUND", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def console_messages(stderr: str) -> list[str]:
    """console.log/error lines and uncaught exceptions, as Chromium logs them with --enable-logging."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]
