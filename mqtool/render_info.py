"""Terminal rendering of :class:`mqtool.info.StoreInfo`: one screen — overview, files, topics, consumer lag,
a timeline drawn as a column chart (one column per time bucket, damaged buckets marked ``x`` and red), damage.

Never reads a store; takes the model only. Colour is decoration: every mark also exists without colour
(``NO_COLOR`` / ``--no-color``).
"""
from __future__ import annotations

import datetime as _dt
import re

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from mqtool.common import plural
from mqtool.families import REGISTRY
from mqtool.info import StoreInfo, Timeline, bucket_label, merged_buckets
from mqtool.render import iso_ms, stdout_console, text

MAX_ROWS = 12
CHART_HEIGHT = 6
_EIGHTHS = " ▁▂▃▄▅▆▇█"


def human_bytes(n: int | None) -> str:
    if n is None:
        return ""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{int(v)} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return str(n)


def human_span(ms: int) -> str:
    if ms < 1000:
        return f"{ms} ms"
    s = ms / 1000
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} days"


def time_label(ms: int | None, bucket_ms: int | None = None) -> str:
    if ms is None:
        return ""
    try:
        t = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    if bucket_ms is not None and bucket_ms < 1000:
        return t.strftime("%H:%M:%S.") + f"{ms % 1000:03d}"
    if bucket_ms is not None and bucket_ms >= 86_400_000:
        return t.strftime("%Y-%m-%d")
    return t.strftime("%Y-%m-%d %H:%M:%S")


def fact_text(label: str, v) -> str:
    """An overview value as text: dicts as k=v lists, epoch-ms ``*Timestamp`` values as ISO times."""
    def one(k, x):
        if str(k).endswith(("Timestamp", "_time")) and isinstance(x, int) and x > 0:
            return iso_ms(x)
        if isinstance(x, dict):         # a nested count (e.g. Kafka control records by type)
            return "(" + ", ".join(f"{a} {one(a, b)}" for a, b in x.items()) + ")"
        return "?" if x is None else str(x)

    if isinstance(v, dict):
        return ", ".join(f"{a}={one(a, b)}" for a, b in v.items())
    return one(label, v)


def render_info(info: StoreInfo, console: Console | None = None) -> None:
    con = console or stdout_console()
    con.print(_overview(info))
    if info.files:
        con.print(_files(info))
    if info.topics:
        con.print(_topics(info))
    if info.consumers:
        con.print(_consumers(info))
    con.print(_timeline_panel(info.timeline, con.width))
    if info.damage_total:
        con.print(_damage(info))
    for n in info.notes:
        con.print(text(f"note: {n}", style="dim"))


def _overview(info: StoreInfo):
    g = Table.grid(padding=(0, 2))
    g.add_column(style="bold", no_wrap=True)
    g.add_column()
    if info.first_store_time is not None:
        span = human_span(info.last_store_time - info.first_store_time)
        when = f"{iso_ms(info.first_store_time)} → {iso_ms(info.last_store_time)}  ({span})"
    elif not info.log_files:
        when = "no log files here (metadata only): messages unknown"
    else:
        when = "no messages"
    g.add_row("stored", when)
    g.add_row("messages", f"{info.messages}  ({human_bytes(info.bytes)} in {plural(len(info.topics), 'topic')})")
    crash = info.crash or {}
    unclean = crash.get("unclean")
    mark = {True: Text("UNCLEAN SHUTDOWN", style="bold red"), False: Text("clean", style="green"),
            None: Text("unknown", style="yellow")}[unclean]
    g.add_row("crash marker", Text.assemble(mark, " — ", text(crash.get("detail") or "")))
    if info.damage_total:
        g.add_row("damage", Text(f"{info.damage_total} damaged ranges, {human_bytes(info.damaged_bytes)}",
                                 style="bold red"))
    else:
        g.add_row("damage", Text("none met while reading", style="green"))
    if info.version_hints:
        g.add_row("version hints", text("; ".join(info.version_hints)))
    for k, v in info.overview.items():
        g.add_row(text(k), text(fact_text(k, v)))
    title = Text.assemble(text(info.store_kind, "bold"), "  ", text(info.path))
    return Panel(g, title=title, title_align="left", expand=False)


def _files(info: StoreInfo):
    t = Table(title="Files", header_style="bold", title_justify="left")
    t.add_column("Part")
    t.add_column("Files", justify="right")
    t.add_column("Size", justify="right")
    t.add_column("Detail", overflow="fold")
    for f in info.files:
        t.add_row(text(f.group), str(f.count), human_bytes(f.bytes), text(f.detail))
    return t


def _short_time(info: StoreInfo):
    """Times inside one UTC day print as HH:MM:SS.mmm (the day is in the overview)."""
    a, z = info.first_store_time, info.last_store_time
    same_day = a is not None and z is not None and a // 86_400_000 == z // 86_400_000

    def fmt(ms):
        if ms is None:
            return ""
        return time_label(ms, 1) if same_day else time_label(ms, 60_000)[:16]

    return fmt


def _unit(info: StoreInfo) -> str:
    """What a topic is split into: Kafka partitions, RocketMQ and LiteMQ queues."""
    return REGISTRY[info.family].unit if info.family in REGISTRY else "queue"


def _topics(info: StoreInfo):
    fmt = _short_time(info)
    t = Table(title="Topics (by bytes)", header_style="bold", title_justify="left")
    t.add_column("Topic", max_width=30, overflow="ellipsis", no_wrap=True)
    t.add_column("Msgs", justify="right", no_wrap=True)
    t.add_column("Bytes", justify="right", no_wrap=True)
    t.add_column("First (UTC)", no_wrap=True)
    t.add_column("Last (UTC)", no_wrap=True)
    t.add_column(f"Per {_unit(info)}: msgs (/{_unit(info)} end)", overflow="fold")
    for ts in info.topics[:MAX_ROWS]:
        parts = []
        queues = ts.queues
        empty = 0
        if len(queues) > 16:   # many queues (e.g. Kafka's 50 __consumer_offsets partitions): the used ones
            used = [q for q in queues if q.messages or q.max_offset]
            empty = len(queues) - len(used)
            queues = used
        for q in queues[:16]:
            s = f"{q.queue}:{q.messages}"
            if q.max_offset is not None and q.max_offset != q.messages:
                s += f"/{q.max_offset}"
            parts.append(s)
        if len(queues) > 16:
            parts.append(f"… {len(queues) - 16} more")
        if empty:
            parts.append(f"(+{empty} empty)")
        t.add_row(text(ts.topic), str(ts.messages), human_bytes(ts.bytes), fmt(ts.first_store_time),
                  fmt(ts.last_store_time), text(" ".join(parts)))
    if len(info.topics) > MAX_ROWS:
        t.caption = f"… {len(info.topics) - MAX_ROWS} more topics (mqtool info --json)"
    return t


def _consumers(info: StoreInfo):
    per: dict[tuple[str, str], list] = {}
    for c in info.consumers:
        if c.lag is not None:
            per.setdefault((c.group, c.topic), []).append((c.queue, f"{c.queue}:{c.lag}"))
    # where the offsets come from (config/consumerOffset.json, __consumer_offsets-N, checkpoint/checkpoint)
    srcs = sorted({re.sub(r"^(.*/)?(__consumer_offsets)-\d+$", r"\2", c.source) for c in info.consumers if c.source})
    src = ", ".join(srcs[:2]) + (" …" if len(srcs) > 2 else "") if srcs else "committed offsets"
    t = Table(title=text(f"Consumer offsets and lag ({src} vs queue ends)"), header_style="bold",
              title_justify="left")
    t.add_column("Group", max_width=32, overflow="ellipsis", no_wrap=True)
    t.add_column("Topic", max_width=32, overflow="ellipsis", no_wrap=True)
    t.add_column(f"{_unit(info).capitalize()}s", justify="right")
    t.add_column("Committed", justify="right")
    t.add_column("Queue end", justify="right")
    t.add_column("Lag", justify="right")
    t.add_column(f"Lag per {_unit(info)}", overflow="fold")
    for g in info.consumer_groups[:MAX_ROWS]:
        pq = [x for _, x in sorted(per.get((g.group, g.topic), []), key=lambda p: (isinstance(p[0], str), p[0]))]
        unknown = g.lag is None
        t.add_row(text(g.group), text(g.topic), str(g.queues), str(g.committed),
                  "?" if unknown else str(g.max_offset),
                  Text("?" if unknown else str(g.lag), style="bold yellow" if g.lag else ""),
                  text(" ".join(pq[:16]) + (" …" if len(pq) > 16 else "") if pq else f"{_unit(info)} end unknown"))
    if len(info.consumer_groups) > MAX_ROWS:
        t.caption = f"… {len(info.consumer_groups) - MAX_ROWS} more (mqtool info --json)"
    return t


def timeline_chart(tl: Timeline, width: int = 80) -> Text:
    """The timeline as text: CHART_HEIGHT rows of block characters, a damage row, a time axis."""
    out = Text()
    if not tl.buckets:
        out.append("no message with a plausible store time to chart", style="dim")
        return out
    label_w = max(len(str(max(tl.peak, 1))), 1) + 1
    avail = max(10, width - label_w - 6)
    buckets, bucket_ms = merged_buckets(tl, avail)       # never wider than the terminal
    n = len(buckets)
    peak = max(max(b.count for b in buckets), 1)
    label_w = max(len(str(peak)), 1) + 1
    cw = max(1, min(3, avail // n))
    levels = [(-(-b.count * CHART_HEIGHT * 8 // peak)) if b.count else 0 for b in buckets]
    for r in range(CHART_HEIGHT - 1, -1, -1):
        lab = str(peak) if r == CHART_HEIGHT - 1 else ("0" if r == 0 else "")
        out.append(lab.rjust(label_w) + " │")
        for b, lv in zip(buckets, levels):
            fill = min(8, max(0, lv - r * 8))
            ch = _EIGHTHS[fill] * cw
            out.append(ch, style="red" if b.damaged else "cyan")
        out.append("\n")
    out.append(" " * label_w + " └" + "─" * (cw * n) + "\n")
    if any(b.damaged for b in buckets):
        out.append(" " * label_w + "  ")
        for b in buckets:
            out.append(("x" if b.damaged else " ") * cw, style="bold red")
        out.append("  x = damaged range\n", style="red")
    a, z = buckets[0].start, buckets[-1].start + bucket_ms
    room = max(cw * n, width - label_w - 2)
    left, right = time_label(a, bucket_ms), time_label(z, bucket_ms)
    if len(left) + len(right) + 1 > room:             # drop the date, then the right label
        if bucket_ms < 86_400_000:
            left, right = time_label(a, 1)[:8], time_label(z, 1)[:8]       # HH:MM:SS
        if len(left) + len(right) + 1 > room:
            right = ""
    pad = max(1, cw * n - len(left) - len(right))
    out.append(" " * (label_w + 2) + (left + " " * pad + right if right else left[:room]))
    return out


def _timeline_panel(tl: Timeline, width: int):
    body = timeline_chart(tl, width - 4)
    title = "Timeline"
    if tl.bucket:
        label_w = len(str(max(tl.peak, 1))) + 1
        drawn, bms = merged_buckets(tl, max(10, width - 4 - label_w - 6))
        title += (f" — messages per {bucket_label(bms)} bucket (UTC), peak "
                  f"{max((b.count for b in drawn), default=0)}")
    extra = []
    if tl.implausible:
        extra.append(Text(f"{tl.implausible} messages with implausible store times left out", style="yellow"))
    return Panel(Group(body, *extra), title=title, title_align="left", expand=False)


def _damage(info: StoreInfo):
    t = Table(title=f"Damaged ranges met while reading ({info.damage_total})", header_style="bold",
              title_justify="left")
    t.add_column("File@position", overflow="fold", max_width=60)
    t.add_column("Offset", justify="right")
    t.add_column("Bytes", justify="right")
    t.add_column("Code")
    t.add_column("Between (UTC)", no_wrap=True)
    for d in info.damage[:5]:
        when = f"{iso_ms(d.time_before) or '…'} → {iso_ms(d.time_after) or '…'}"
        if d.time_before is not None and d.time_before == d.time_after:
            when = iso_ms(d.time_before)
        t.add_row(text(f"{d.file}@{d.position}"), str(d.offset), str(d.length), text(d.code, style="red"), when)
    if info.damage_total > 5:
        t.caption = text(f"… {info.damage_total - 5} more: mqtool verify store {info.path}")
    return t
