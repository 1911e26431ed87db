"""Write the finding-code tables of the docs from the registry (mqtool/codes.py).

    python tools/gen_code_docs.py          # rewrite the generated blocks
    python tools/gen_code_docs.py --check  # exit 1 when a doc is not current (tests run this)

docs/codes.md is generated whole; docs/kafka.md and docs/litemq.md get their family's table between
``<!-- codes:FAMILY -->`` and ``<!-- /codes -->``.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mqtool.codes import CLASSES, FAMILY_NAMES, REGISTRY  # noqa: E402

FAMILY_TITLES = {"rocketmq": "RocketMQ", "litemq": "LiteMQ", "kafka": "Kafka"}
BLOCK = re.compile(r"(<!-- codes:(\w+) -->\n).*?(<!-- /codes -->)", re.S)


def family_table(family: str) -> str:
    rows = ["| code | severity | kind | meaning |", "|---|---|---|---|"]
    for c in REGISTRY.values():
        if family in c.families:
            rows.append(f"| `{c.code}` | {' / '.join(c.severities)} | {c.klass} | {c.meaning.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


def codes_md() -> str:
    out = ["# Finding codes", "",
           "Generated from `mqtool/codes.py` by `tools/gen_code_docs.py`; do not edit by hand. "
           "`mqtool explain CODE` prints one entry, `mqtool explain --list [--json]` all of them.", "",
           "Severity: the first level listed is the usual one; a code listed with two levels is emitted at "
           "the second one in the circumstances its meaning names. Kafka codes carry the prefix `kafka.`.", "",
           "## Kinds: likely causes and what to do next", "",
           "| kind | likely causes | what to do next |", "|---|---|---|"]
    for k, (causes, action) in CLASSES.items():
        out.append(f"| {k} | {causes} | {action} |")
    out.append("")
    for fam in FAMILY_NAMES.values():
        n = sum(1 for c in REGISTRY.values() if fam in c.families)
        out += [f"## {FAMILY_TITLES[fam]} ({n} codes)", "", family_table(fam)]
    return "\n".join(out)


def render_docs() -> dict[Path, str]:
    """Every generated doc: path → its content as it should be."""
    out = {ROOT / "docs" / "codes.md": codes_md()}
    for name in ("kafka.md", "litemq.md"):
        p = ROOT / "docs" / name
        text = p.read_text(encoding="utf-8")
        out[p] = BLOCK.sub(lambda m: m.group(1) + "\n" + family_table(m.group(2)) + "\n" + m.group(3), text)
    return out


def write_or_check(docs: dict, argv: list[str], tool: str) -> int:
    """Write each generated doc (path → text) that differs, or with ``--check`` list them and return 1."""
    stale = []
    for p, text in docs.items():
        if not p.exists() or p.read_text(encoding="utf-8") != text:
            stale.append(p)
            if "--check" not in argv:
                p.write_text(text, encoding="utf-8")
    if stale and "--check" in argv:
        print(f"not current (run python tools/{tool}):", ", ".join(str(p.relative_to(ROOT)) for p in stale))
        return 1
    return 0


def main(argv: list[str]) -> int:
    return write_or_check(render_docs(), argv, "gen_code_docs.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
