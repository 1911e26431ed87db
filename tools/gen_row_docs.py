"""Write the field tables of the docs from the row schemas (mqtool/<family>/rows.py).

    python tools/gen_row_docs.py          # rewrite the generated blocks
    python tools/gen_row_docs.py --check  # exit 1 when a doc is not current (tests run this)

A block is ``<!-- rows:FAMILY:KIND -->`` … ``<!-- /rows -->`` in any docs/*.md: the table of the row kind
``KIND`` (the name of a :class:`mqtool.rows.RowSchema` in ``mqtool/FAMILY/rows.py``, e.g. ``MESSAGE``).
"""
from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BLOCK = re.compile(r"(<!-- rows:(\w+):(\w+) -->\n).*?(<!-- /rows -->)", re.S)


def field_table(family: str, kind: str) -> str:
    schema = getattr(importlib.import_module(f"mqtool.{family}.rows"), kind)
    rows = ["| field | type | meaning |", "|---|---|---|"]
    for f in schema:
        typ = "object" if f.type == "json" else f.type
        notes = []
        if f.optional:
            notes.append("may be absent")
        if not f.export:
            notes.append("not in Parquet/Spark")
        extra = f" ({'; '.join(notes)})" if notes else ""
        rows.append(f"| `{f.name}` | {typ} | {f.description.replace('|', '/')}{extra} |")
    return "\n".join(rows) + "\n"


def render_docs() -> dict[Path, str]:
    """Every doc with a generated block: path → its content as it should be."""
    out = {}
    for p in sorted((ROOT / "docs").glob("*.md")):
        text = p.read_text(encoding="utf-8")
        if BLOCK.search(text):
            out[p] = BLOCK.sub(lambda m: m.group(1) + "\n" + field_table(m.group(2), m.group(3)) + "\n"
                               + m.group(4), text)
    return out


def main(argv: list[str]) -> int:
    from gen_code_docs import write_or_check       # tools/ is this script's directory (sys.path[0])

    return write_or_check(render_docs(), argv, "gen_row_docs.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
