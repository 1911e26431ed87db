"""The HTML incident report: one self-contained file (inline CSS and SVG, no script, no URL, no network).

Sections: verdict and overview, timeline chart (damaged buckets in red), per-topic size chart, where the
damage lies (the log as a strip with damaged ranges marked, and findings per file), consumer lag, files,
the verify findings table. Takes plain data only (:class:`~mqtool.info.StoreInfo`, findings, summary,
file sizes); never reads a store file. Every text from the store is escaped.
"""
from __future__ import annotations

import datetime as _dt
from collections import Counter, defaultdict
from html import escape
from typing import Any

from mqtool import __version__
from mqtool.common import plural
from mqtool.info import StoreInfo, bucket_label, merged_buckets
from mqtool.render import iso_ms
from mqtool.render_info import _unit, fact_text, human_bytes, human_span, time_label
from mqtool.sanitize import visible

MAX_FINDING_ROWS = 1000        # root findings listed (all are counted)
MAX_CONSEQUENCE_ROWS = 20     # findings listed under each root (all are counted)
MAX_TOPIC_BARS = 25
MAX_TABLE_ROWS = 1000      # topics / consumer rows in the HTML tables (the JSON of `mqtool info` has all)
MAX_CLEAN_STRIPS = 8       # with more logs than this, the damage map draws only those with marks
MAX_SVG_BUCKETS = 1500     # more timeline buckets than this are merged for drawing
SEV_ORDER = {"error": 0, "warning": 1, "info": 2}

CSS = """
:root { --fg:#1b1f24; --muted:#5b6470; --line:#d9dee5; --bar:#2f6db5; --bad:#c62828; --badbg:#fde2e2;
        --warn:#b26a00; --ok:#2e7d32; --bg:#ffffff; --panel:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; max-width: 1180px; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid var(--line);
     padding-bottom: 4px; }
.sub { color: var(--muted); margin-bottom: 16px; word-break: break-all; }
.verdict { display: inline-block; padding: 3px 10px; border-radius: 4px; font-weight: 600; color: #fff; }
.v-damaged { background: var(--bad); } .v-sound { background: var(--ok); }
.v-sound-with-warnings { background: var(--warn); }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 10px; margin: 14px 0; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; }
.card .k { color: var(--muted); font-size: 12px; } .card .v { font-size: 18px; font-weight: 600; }
.card.bad .v { color: var(--bad); }
table { border-collapse: collapse; width: 100%; margin: 6px 0 10px; font-size: 13px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
td.name, td.msg { overflow-wrap: anywhere; } td.t, td.num { white-space: nowrap; }
th { background: var(--panel); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.path { word-break: break-all; min-width: 14em; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; word-break: break-all; }
.sev-error { color: var(--bad); font-weight: 600; } .sev-warning { color: var(--warn); font-weight: 600; }
.sev-info { color: var(--muted); }
svg { display: block; max-width: 100%; height: auto; }
svg text { font: 11px system-ui, sans-serif; fill: var(--fg); }
.note { color: var(--muted); font-size: 13px; }
.legend span { display: inline-block; width: 12px; height: 12px; vertical-align: -2px; margin: 0 4px 0 12px; }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; }
@media print { body { padding: 0; } h2 { break-after: avoid; } }
@media (max-width: 700px) { body { padding: 12px; } table { display: block; overflow-x: auto; }
  td.t { white-space: normal; } td.name, td.msg { min-width: 12em; }
  dl.kv { grid-template-columns: 1fr; } dl.kv dd { margin-bottom: 6px; } }
"""


def _e(v: Any) -> str:
    """Text for the page: escaped for HTML, and (a report is read by a person) with controls, bidi overrides
    and the bytes of names that are not UTF-8 shown as escapes (:func:`mqtool.sanitize.visible`); a raw
    surrogate escape could not even be written as UTF-8."""
    return escape("" if v is None else visible(str(v)), quote=True)


def render_report(info: StoreInfo, findings: list, summary: Any, file_sizes: dict[str, int] | None = None,
                  generated_ms: int | None = None) -> str:
    """The whole report as one HTML string."""
    file_sizes = file_sizes or {}
    verdict = getattr(summary, "verdict", "unknown")
    gen = generated_ms if generated_ms is not None else int(_dt.datetime.now(_dt.timezone.utc).timestamp() * 1000)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>mqtool report — {_e(info.path)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{_e(info.store_kind)} — incident report</h1>",
        f'<div class="sub">{_e(info.path)} · generated {_e(iso_ms(gen))} by mqtool {_e(__version__)} · '
        f'verify verdict <span class="verdict v-{_e(verdict)}" id="verdict">{_e(verdict)}</span></div>',
        _cards(info, summary),
        _section("overview", "Overview", _overview(info, summary)),
        _section("timeline", "Timeline", _timeline_svg(info)),
        _section("topics", "Bytes per topic", _topics_svg(info) + _topics_table(info)),
        _section("damage", "Where the damage lies", _damage_section(info, findings, file_sizes)),
    ]
    if info.consumers:
        parts.append(_section("consumers", "Consumer offsets and lag", _consumers_table(info)))
    parts.append(_section("files", "Files", _files_table(info)))
    parts.append(_section("findings", "Verify findings", _findings(findings, summary, info.path)))
    if info.notes:
        parts.append(_section("notes", "Notes", "<ul>" + "".join(f"<li>{_e(n)}</li>" for n in info.notes)
                              + "</ul>"))
    parts.append("<footer>Self-contained report: no script, no external resource. Times are UTC. "
                 "Offsets are global log offsets; positions are byte positions inside the named file.</footer>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _section(ident: str, title: str, body: str) -> str:
    return f'<section id="{ident}"><h2>{_e(title)}</h2>{body}</section>'


def _cards(info: StoreInfo, summary) -> str:
    span = human_span(info.last_store_time - info.first_store_time) if info.first_store_time is not None else "—"
    unclean = info.crash.get("unclean")
    cards = [
        ("messages", f"{info.messages:,}", False),
        ("bytes", human_bytes(info.bytes), False),
        ("topics", str(len(info.topics)), False),
        ("time span", span, False),
        ("shutdown", {True: "UNCLEAN", False: "clean", None: "unknown"}[unclean], bool(unclean)),
        ("errors", str(getattr(summary, "errors", 0)), bool(getattr(summary, "errors", 0))),
        ("warnings", str(getattr(summary, "warnings", 0)), False),
        _damage_card(info, summary),
    ]
    return '<div class="cards">' + "".join(
        f'<div class="card{" bad" if bad else ""}"><div class="k">{_e(k)}</div><div class="v">{_e(v)}</div></div>'
        for k, v, bad in cards) + "</div>"


def _damage_card(info: StoreInfo, summary) -> tuple[str, str, bool]:
    """Damaged ranges and bytes as `verify store` counts them (the merged spans of its root findings)."""
    d = summary.to_dict() if summary is not None else None
    if d is None:
        return "damaged ranges", f"{info.damage_total} ({human_bytes(info.damaged_bytes)})", bool(info.damage_total)
    return ("damaged ranges", f"{d['damaged_ranges']} ({human_bytes(d['damaged_bytes'])})",
            bool(d["damaged_ranges"]))


def _overview(info: StoreInfo, summary) -> str:
    rows = [("family", info.family), ("path", info.path)]
    if info.first_store_time is not None:
        rows.append(("first store time", iso_ms(info.first_store_time)))
        rows.append(("last store time", iso_ms(info.last_store_time)))
    rows.append(("crash marker", info.crash.get("detail")))
    for h in info.version_hints:
        rows.append(("version hint", h))
    for k, v in info.overview.items():
        rows.append((k, fact_text(k, v)))
    if summary is not None:
        d = summary.to_dict()
        rows.append(("verify", f"errors={d['errors']} warnings={d['warnings']} infos={d['infos']} "
                               f"(consequences {d['consequences']}) messages={d['messages']} "
                               f"damaged_ranges={d['damaged_ranges']} damaged_bytes={d['damaged_bytes']}"))
    return '<dl class="kv">' + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows) + "</dl>"


def _timeline_svg(info: StoreInfo) -> str:
    tl = info.timeline
    if not tl.buckets:
        if not info.log_files:
            return '<p class="note">No log files here (metadata only): no messages to chart.</p>'
        return '<p class="note">No message with a plausible store time: nothing to chart.</p>'
    W, H, L, R, T, B = 1100, 260, 56, 12, 14, 44
    pw, ph = W - L - R, H - T - B
    buckets, width = merged_buckets(tl, MAX_SVG_BUCKETS)     # merge neighbours past MAX_SVG_BUCKETS
    n = len(buckets)
    peak = max(max((x.count for x in buckets), default=0), 1)
    bw = pw / n
    out = [f'<svg id="timeline-chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
           f'aria-label="messages per {_e(tl.bucket)} bucket">']
    for frac in (0, 0.5, 1):
        y = T + ph - frac * ph
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#d9dee5"/>')
        out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{int(round(peak * frac))}</text>')
    for i, b in enumerate(buckets):
        x = L + i * bw
        if b.damaged:
            out.append(f'<rect class="damaged-bucket" x="{x:.2f}" y="{T}" width="{max(bw, 1.5):.2f}" height="{ph}" '
                       f'fill="#fde2e2"/>')
        if b.count:
            h = max(1.0, b.count / peak * ph)
            fill = "#c62828" if b.damaged else "#2f6db5"
            out.append(f'<rect class="bar" x="{x + bw * 0.08:.2f}" y="{T + ph - h:.2f}" '
                       f'width="{max(bw * 0.84, 0.8):.2f}" height="{h:.2f}" fill="{fill}">'
                       f'<title>{_e(iso_ms(b.start))}: {b.count} messages, {_e(human_bytes(b.bytes))}'
                       f'{" — damaged range" if b.damaged else ""}</title></rect>')
    out.append(f'<line x1="{L}" y1="{T + ph}" x2="{W - R}" y2="{T + ph}" stroke="#5b6470"/>')
    ticks = sorted({0, n // 2, n}) if n > 1 else [0, 1]
    for i in ticks:
        ms = buckets[0].start + i * width
        x = L + i * bw
        anchor = "start" if i == 0 else ("end" if i == n else "middle")
        out.append(f'<line x1="{x:.1f}" y1="{T + ph}" x2="{x:.1f}" y2="{T + ph + 4}" stroke="#5b6470"/>')
        out.append(f'<text x="{x:.1f}" y="{T + ph + 17}" text-anchor="{anchor}">'
                   f'{_e(time_label(ms, width))}</text>')
    drawn = bucket_label(width)
    out.append(f'<text x="{L + pw / 2:.1f}" y="{H - 6}" text-anchor="middle">store time (UTC), '
               f'{_e(drawn)} buckets, peak {peak} messages</text>')
    out.append("</svg>")
    legend = ('<div class="legend note"><span style="background:#2f6db5"></span>messages'
              '<span style="background:#c62828"></span>messages in a damaged bucket'
              '<span style="background:#fde2e2"></span>damaged range (between its last good neighbours)</div>')
    extra = ""
    if tl.implausible:
        extra = f'<p class="note">{tl.implausible} messages with implausible store times are not charted.</p>'
    return "".join(out) + legend + extra


def _topics_svg(info: StoreInfo) -> str:
    topics = [t for t in info.topics if t.bytes][:MAX_TOPIC_BARS]
    if not topics:
        return '<p class="note">No message bytes to chart.</p>'
    W, row, L, R = 1100, 22, 300, 190
    H = row * len(topics) + 10
    mx = max(t.bytes for t in topics) or 1
    out = [f'<svg id="topic-chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
           f'aria-label="bytes per topic">']
    for i, t in enumerate(topics):
        y = 5 + i * row
        w = max(1.0, t.bytes / mx * (W - L - R))
        name = t.topic if len(t.topic) <= 44 else t.topic[:41] + "…"
        out.append(f'<text x="{L - 8}" y="{y + 15}" text-anchor="end">{_e(name)}<title>{_e(t.topic)}</title></text>')
        out.append(f'<rect class="topic-bar" x="{L}" y="{y + 3}" width="{w:.2f}" height="{row - 6}" fill="#2f6db5">'
                   f'<title>{_e(t.topic)}: {t.messages} messages, {_e(human_bytes(t.bytes))}</title></rect>')
        out.append(f'<text x="{L + w + 6:.2f}" y="{y + 15}">{_e(human_bytes(t.bytes))} · {t.messages:,} msgs</text>')
    out.append("</svg>")
    more = len([t for t in info.topics if t.bytes]) - len(topics)
    return "".join(out) + (f'<p class="note">… {more} smaller topics in the table below.</p>' if more > 0 else "")


def _topics_table(info: StoreInfo) -> str:
    unit = _unit(info)
    if not info.topics:
        return ""
    rows = []
    for t in info.topics[:MAX_TABLE_ROWS]:
        per = " ".join(f"{q.queue}:{q.messages}" + (f"/{q.max_offset}" if q.max_offset is not None
                                                      and q.max_offset != q.messages else "")
                       for q in t.queues)
        rows.append(f"<tr class=topic-row><td class=name>{_e(t.topic)}</td><td class=num>{t.messages:,}</td>"
                    f"<td class=num>{_e(human_bytes(t.bytes))}</td><td class=t>{_e(iso_ms(t.first_store_time))}</td>"
                    f"<td class=t>{_e(iso_ms(t.last_store_time))}</td><td class=msg>{_e(per)}</td></tr>")
    more = len(info.topics) - MAX_TABLE_ROWS
    tail = f'<p class="note">… {more} more topics: <code>mqtool info --json</code> lists all.</p>' if more > 0 else ""
    return tail + ("<table><thead><tr><th>Topic</th><th class=num>Messages</th><th class=num>Bytes</th>"
            f"<th>First store time</th><th>Last store time</th><th>Per {unit}: messages (/{unit} end)</th></tr></thead>"
            "<tbody>" + "".join(rows) + "</tbody></table>")


def _consumers_table(info: StoreInfo) -> str:
    rows = "".join(
        f"<tr><td class=name>{_e(c.group)}</td><td class=name>{_e(c.topic)}</td><td class=num>{_e(c.queue)}</td>"
        f"<td class=num>{c.committed}</td><td class=num>{_e(c.max_offset if c.max_offset is not None else '?')}</td>"
        f"<td class=num>{_e(c.lag if c.lag is not None else '?')}</td><td>{_e(c.source)}</td></tr>"
        for c in info.consumers[:MAX_TABLE_ROWS])
    more = len(info.consumers) - MAX_TABLE_ROWS
    tail = f'<p class="note">… {more} more rows: <code>mqtool info --json</code> lists all.</p>' if more > 0 else ""
    return tail + ("<table><thead><tr><th>Group</th><th>Topic</th><th class=num>Queue</th><th class=num>Committed</th>"
            "<th class=num>Queue end</th><th class=num>Lag</th><th>Source</th></tr></thead><tbody>"
            + rows + "</tbody></table>")


def _files_table(info: StoreInfo) -> str:
    rows = "".join(f"<tr><td>{_e(f.group)}</td><td class=num>{f.count}</td><td class=num>{_e(human_bytes(f.bytes))}"
                   f"</td><td>{_e(f.detail)}</td></tr>" for f in info.files)
    return ("<table><thead><tr><th>Part</th><th class=num>Files</th><th class=num>Size</th><th>Detail</th></tr>"
            "</thead><tbody>" + rows + "</tbody></table>")


def _damage_section(info: StoreInfo, findings: list, file_sizes: dict[str, int]) -> str:
    bad = [f for f in findings if f.severity in ("error", "warning")]
    out = []
    streams: dict[Any, list[dict]] = defaultdict(list)
    for lf in info.log_files:
        streams[lf["stream"]].append(lf)
    by_file_marks: dict[str, list[tuple[int, int, str, str]]] = defaultdict(list)   # pos, len, colour, label
    for d in info.damage:
        if d.position is not None:
            by_file_marks[d.file].append((d.position, max(1, d.length), "#c62828", f"{d.code}: {d.message}"))
    for f in bad:
        if f.file and f.position is not None:
            colour = "#c62828" if f.severity == "error" else "#b26a00"
            by_file_marks[f.file].append((f.position, 1, colour, f"{f.severity} {f.code}: {f.message}"))
    if streams:
        drawn = streams
        if len(streams) > MAX_CLEAN_STRIPS:   # many logs (Kafka partitions): draw the damaged ones only
            drawn = {k: v for k, v in streams.items() if any(f["file"] in by_file_marks for f in v)}
            out.append(f'<p class="note">{len(streams) - len(drawn)} of {len(streams)} logs have no damaged range '
                       'and no error or warning finding; they are not drawn.</p>')
        for stream, files in drawn.items():
            out.append(_log_strip(stream, sorted(files, key=lambda x: x["base"]), by_file_marks))
    log_names = {lf["file"] for lf in info.log_files}
    others = [p for p in by_file_marks if p not in log_names and file_sizes.get(p)]
    for p in sorted(others)[:30]:
        out.append(_log_strip(p, [{"file": p, "base": 0, "size": file_sizes[p]}], by_file_marks, single=True))
    counts: dict[str, Counter] = defaultdict(Counter)
    first_pos: dict[str, int] = {}
    for f in bad:
        key = f.file or "-"
        counts[key][f.severity] += 1
        if f.position is not None:
            first_pos[key] = min(first_pos.get(key, f.position), f.position)
    if counts:
        rows = "".join(
            f"<tr class=damage-file><td class=path>{_e(fn)}</td><td class=num>{c['error']}</td>"
            f"<td class=num>{c['warning']}</td><td class=num>{_e(first_pos.get(fn, ''))}</td></tr>"
            for fn, c in sorted(counts.items(), key=lambda kv: (-kv[1]["error"], -kv[1]["warning"], kv[0])))
        out.append("<table><thead><tr><th>File</th><th class=num>Errors</th><th class=num>Warnings</th>"
                   "<th class=num>First position</th></tr></thead><tbody>" + rows + "</tbody></table>")
    if not out or (not counts and not info.damage_total):
        out.append('<p class="note" id="no-damage">No damaged range met while reading and no error or warning '
                   'finding.</p>')
    return "".join(out)


def _log_strip(stream, files: list[dict], marks: dict, single: bool = False) -> str:
    total = sum(max(1, f["size"]) for f in files)
    W, L, R, H = 1100, 10, 10, 54
    pw = W - L - R
    title = ("file " + str(stream)) if single else ("log" if stream is None else f"log {stream}")
    out = [f'<svg class="damage-map" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
           f'aria-label="{_e(title)}">',
           f'<text x="{L}" y="12">{_e(title)} — {len(files)} file(s), {_e(human_bytes(total))}; '
           f'red = damaged</text>']
    x = L
    y0, hh = 18, 22
    for f in files:
        w = max(1, f["size"]) / total * pw
        out.append(f'<rect x="{x:.2f}" y="{y0}" width="{w:.2f}" height="{hh}" fill="#e8eef6" stroke="#9aa8b8" '
                   f'stroke-width="0.6"><title>{_e(f["file"])} (base {f["base"]}, {f["size"]} bytes)</title></rect>')
        for pos, length, colour, label in marks.get(f["file"], []):
            mx = x + min(pos, f["size"]) / max(1, f["size"]) * w
            mw = max(2.0, length / max(1, f["size"]) * w)
            out.append(f'<rect class="damage-mark" x="{mx:.2f}" y="{y0 - 2}" width="{mw:.2f}" height="{hh + 4}" '
                       f'fill="{colour}"><title>{_e(f["file"])}@{pos}: {_e(label)}</title></rect>')
        x += w
    out.append(f'<text x="{L}" y="{H - 2}">offset {files[0]["base"]}</text>')
    out.append(f'<text x="{W - R}" y="{H - 2}" text-anchor="end">{files[-1]["base"] + files[-1]["size"]}</text>')
    out.append("</svg>")
    return "".join(out)


def _findings(findings: list, summary, store_path: str) -> str:
    """Counts by code, then one row per root finding (its consequences, capped, folded under it)."""
    if not findings:
        return '<p class="note" id="no-findings">verify reported no finding.</p>'
    by_code = Counter((f.severity, f.code) for f in findings)
    code_rows = "".join(f"<tr><td class=sev-{_e(s)}>{_e(s)}</td><td>{_e(c)}</td><td class=num>{n}</td></tr>"
                        for (s, c), n in sorted(by_code.items(), key=lambda kv: (SEV_ORDER.get(kv[0][0], 3), kv[0][1])))
    caused: dict[str, list] = {}
    roots = []
    for f in findings:
        if f.caused_by is None:
            roots.append(f)
        else:
            caused.setdefault(f.caused_by, []).append(f)
    roots.sort(key=lambda f: (SEV_ORDER.get(f.severity, 3), f.file or "", f.position or 0))
    rows = []
    for f in roots[:MAX_FINDING_ROWS]:
        rows.append(_finding_row(f, store_path, "finding"))
        sub = caused.get(f.id, [])
        if sub:
            inner = "".join(_finding_row(c, store_path, "consequence") for c in sub[:MAX_CONSEQUENCE_ROWS])
            if len(sub) > MAX_CONSEQUENCE_ROWS:
                inner += (f'<tr><td colspan=8 class="note">{len(sub) - MAX_CONSEQUENCE_ROWS} more not listed'
                          "</td></tr>")
            rows.append(f'<tr class="consequences"><td colspan=8><details><summary>and {len(sub)} consequence'
                        f'{"s" if len(sub) != 1 else ""} (findings that follow from this one)</summary>'
                        f"<table>{inner}</table></details></td></tr>")
    more = ""
    if len(roots) > MAX_FINDING_ROWS:
        more = (f'<p class="note">{len(roots) - MAX_FINDING_ROWS} more root findings not shown: '
                f'<code>mqtool verify store {_e(store_path)} --json</code> lists all.</p>')
    return ("<table><thead><tr><th>Severity</th><th>Code</th><th class=num>Count</th></tr></thead><tbody>"
            + code_rows + "</tbody></table>"
            + f'<p class="note">{len(roots)} root findings; {len(findings) - len(roots)} findings follow from '
              "them and are folded under the one they follow from.</p>"
            + '<table id="findings-table"><thead><tr><th>Severity</th><th>Code</th><th>File</th>'
              "<th class=num>Position</th><th class=num>Offset</th><th>Expected</th><th>Actual</th><th>Message</th>"
              "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>" + more)


def _finding_row(f, store_path: str, cls: str) -> str:
    return (f'<tr class="{cls}" id="{_e(f.id)}" data-severity="{_e(f.severity)}"><td class="sev-{_e(f.severity)}">'
            f"{_e(f.severity)}</td><td>{_e(f.code)}</td><td class=path>{_e(_short(f.file, store_path))}</td>"
            f"<td class=num>{_e(f.position)}</td><td class=num>{_e(f.offset)}</td>"
            f"<td class=msg>{_e(_clip(f.expected))}</td><td class=msg>{_e(_clip(f.actual))}</td>"
            f"<td class=msg>{_e(f.message)}</td></tr>")


def _short(path: str | None, root: str) -> str:
    if not path:
        return "-"
    r = root.rstrip("/") + "/"
    return path[len(r):] if path.startswith(r) else path


def _clip(v, n: int = 60) -> str:
    if v is None:
        return ""
    s = str(v)
    return s if len(s) <= n else s[:n - 1] + "…"

