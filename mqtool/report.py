"""``mqtool report``: info + verify of one store, rendered as one self-contained HTML file.

Needs nothing more from a family than ``info.collect`` (see :mod:`mqtool.info`) and the ``ops.verify``
engine function every family already provides (see :mod:`mqtool.cli`).
"""
from __future__ import annotations

import os

from mqtool.causes import linked
from mqtool.detect import detect
from mqtool.families import family_module
from mqtool.info import build_info
from mqtool.options import InfoOptions, VerifyOptions
from mqtool.render_html import render_report

MAX_FINDINGS_KEPT = 100_000


def build_report(path, fmt: str | None, info_opts: InfoOptions, verify_opts: VerifyOptions):
    """Returns (html, info, summary, findings_dropped)."""
    family = detect(path, fmt)
    info = build_info(path, family, info_opts)
    ops = family_module(family, "ops")
    # the same ids, caused_by and damaged ranges as `verify store`
    findings_iter, summary_fn = linked(*ops.verify("store", path, verify_opts), path, family)
    findings = []
    dropped = 0
    for f in findings_iter:
        if len(findings) < MAX_FINDINGS_KEPT:
            findings.append(f)
        else:
            dropped += 1
    summary = summary_fn()
    if dropped:
        info.notes.append(f"{dropped} verify findings beyond the first {MAX_FINDINGS_KEPT} are counted, not listed")
    sizes: dict[str, int] = {}
    for f in findings:
        if f.file and f.file not in sizes and f.position is not None:
            try:
                sizes[f.file] = os.path.getsize(f.file)
            except OSError:
                pass
    return render_report(info, findings, summary, sizes), info, summary, dropped
