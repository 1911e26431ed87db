#!/usr/bin/env python3
"""Corruption matrix over the real stores: damage copies, run verify with salvage, print the scores.

    python tools/corruption_matrix.py [--family rocketmq] [--store NAME] [--kind KIND] [--json] [-v]

Columns: (a) share of (detectable) damage events reported with the right code at the right file/position;
"n/d" counts events no checksum or cross-check can see (the adapter says why; (a) is "n/a" when all are),
(b) share of untouched messages recovered by salvage, (c) false findings on untouched regions.
Targets: 100 % / 100 % / 0. Exit 1 when a target is missed. See tools/corruption/__init__.py for how a
family plugs in.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.corruption import ADAPTERS, KINDS, run_family, table  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--realdata", default=os.environ.get("MQTOOL_REALDATA", str(ROOT.parent / "shared" / "realdata")))
    ap.add_argument("--family", action="append", choices=sorted(ADAPTERS))
    ap.add_argument("--store", action="append", help="only this store (directory name), repeatable")
    ap.add_argument("--kind", action="append", choices=KINDS)
    ap.add_argument("--json", action="store_true", help="rows as NDJSON")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per event, and every miss")
    args = ap.parse_args(argv)
    realdata = Path(args.realdata)
    outcomes = []
    for fam in args.family or list(ADAPTERS):
        log = (lambda s: print(s, file=sys.stderr)) if args.verbose else None
        got = run_family(fam, realdata, args.kind, args.store, progress=log)
        if not got:
            print(f"{fam}: no adapter or no store with a log (skipped)", file=sys.stderr)
        outcomes += got
    rows = table(outcomes)
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print(f"{'family':9} {'damage kind':24} {'stores':>6} {'events':>6} {'n/d':>4} {'(a) reported':>13} "
              f"{'(b) recovered':>22} {'(c) false':>9}")
        for r in rows:
            a = f"{r['reported_pct']:12.1f}%" if r["detectable"] else f"{'n/a':>13}"
            print(f"{r['family']:9} {r['kind']:24} {r['stores']:6} {r['events']:6} {r['undetectable']:4} {a} "
                  f"{r['recovered_pct']:8.1f}% ({r['recovered']:5}/{r['untouched']:5}) {r['false_findings']:9}")
    if args.verbose:
        for o in outcomes:
            if not o.detectable:
                print(f"n/d  {o.family} {o.store} {o.kind} {o.label}: {o.note}", file=sys.stderr)
            if o.missing or o.false_findings or o.recovered < o.untouched:
                print(f"MISS {o.family} {o.store} {o.kind} {o.label}: missing={o.missing} "
                      f"recovered={o.recovered}/{o.untouched}", file=sys.stderr)
                for f in o.false_findings[:5]:
                    print(f"   false: {f['severity']} {f['code']} {f['file']}@{f['position']} off={f['offset']} "
                          f"{f['message'][:120]}", file=sys.stderr)
    ok = all(r["reported_pct"] == 100 and r["recovered_pct"] == 100 and r["false_findings"] == 0 for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
