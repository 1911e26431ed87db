"""The documents a user reads stay true: generated CLI reference current, README short, links resolve."""
from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_cli_reference_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_cli_reference.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_cli_reference_lists_every_option():
    from mqtool.cli import cli

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")

    def walk(cmd):
        yield cmd
        for sub in getattr(cmd, "commands", {}).values():
            yield from walk(sub)

    missing = [(c.name, o) for c in walk(cli) for p in c.params for o in getattr(p, "opts", ())
               if o.startswith("-") and o not in text]
    assert missing == []


def test_readme_is_short_for_a_newcomer():
    assert (ROOT / "README.md").stat().st_size <= 15 * 1024


def test_links_stay_inside_the_repository():
    for doc in DOCS:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            assert "://" not in target, f"{doc.name}: external link {target}"
            path = target.split("#", 1)[0]
            assert not (doc.parent / path).resolve().is_relative_to(ROOT.parent) or \
                (doc.parent / path).resolve().is_relative_to(ROOT), f"{doc.name}: link leaves the repository"
            if path:
                assert (doc.parent / path).exists(), f"{doc.name}: broken link {target}"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci[-1].strip() in readme
    assert "mqtool dump commitlog fixtures/rocketmq/store" in readme
