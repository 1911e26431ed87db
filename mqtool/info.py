"""``mqtool info``: what is in a store and when — a family-independent model, built by a per-family collector.

Data flow: a family's ``collect`` walks its store and feeds an :class:`InfoBuilder` (files, messages in log
order, damaged ranges, queue ends, consumer offsets, crash marker, version hints); :meth:`InfoBuilder.finish`
derives the rest (per topic/queue totals, consumer lag, an auto-bucketed timeline with damaged buckets marked)
and returns a :class:`StoreInfo`, plain data that the terminal renderer (:mod:`mqtool.render_info`), ``--json``
and the HTML report (:mod:`mqtool.render_html`) all take. Nothing here prints or reads a store file.

Family contract (``mqtool/<family>/info.py``)::

    def collect(path, b: InfoBuilder, opts: InfoOptions) -> None

Call in any order, except that :meth:`InfoBuilder.add_message` and :meth:`InfoBuilder.add_damage` must come
in log order *per stream* (``stream`` = any hashable naming one append-only log: ``None`` for a RocketMQ/LiteMQ
commitlog, the partition directory for Kafka), so damage can be placed in time between its neighbours.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Hashable

from mqtool.errors import UsageError
from mqtool.options import InfoOptions

# Bucket widths the timeline may use (ms): 1-2-5 steps below a second, then clock-friendly steps.
BUCKETS_MS = [1, 2, 5, 10, 20, 50, 100, 200, 500,
              1_000, 2_000, 5_000, 10_000, 15_000, 30_000,
              60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000,
              3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000,
              86_400_000, 172_800_000, 604_800_000, 2_592_000_000]
# Store times outside [2001-01-01, now + 1 year] are counted as implausible and kept out of the timeline
# (a bit flip in STORETIMESTAMP must not stretch the chart over decades).
PLAUSIBLE_FROM_MS = 978_307_200_000
_HIST_MAX_KEYS = 200_000
MAX_DAMAGE_KEPT = 10_000


def total_size(paths) -> int:
    """Bytes on disk of ``paths`` (files that cannot be stat'ed count as 0)."""
    n = 0
    for p in paths:
        try:
            n += os.path.getsize(p)
        except OSError:
            pass
    return n


def parse_bucket(text: str | None) -> int | None:
    """``"500ms"``, ``"10s"``, ``"1m"``, ``"1h"``, ``"1d"`` (or plain ms) → milliseconds; None for auto."""
    if text is None or text in ("", "auto"):
        return None
    t = text.strip().lower()
    units = (("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000), ("w", 604_800_000))
    for suf, mul in units:
        if t.endswith(suf) and t[:-len(suf)].isdigit():
            v = int(t[:-len(suf)]) * mul
            break
    else:
        if not t.isdigit():
            raise ValueError(f"bad --bucket {text!r} (use e.g. 100ms, 10s, 1m, 1h, 1d or auto)")
        v = int(t)
    if v <= 0:
        raise ValueError(f"bad --bucket {text!r}: must be positive")
    return v


def bucket_label(ms: int) -> str:
    for unit, mul in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % mul == 0:
            return f"{ms // mul}{unit}"
    return f"{ms}ms"


# ---- the model ----------------------------------------------------------------------------------

@dataclass
class FileGroup:
    group: str              # "commitlog", "consumequeue", "index", "checkpoint", "config", ...
    count: int
    bytes: int
    detail: str | None = None


@dataclass
class QueueStat:
    queue: int | str
    messages: int = 0
    bytes: int = 0
    first_store_time: int | None = None
    last_store_time: int | None = None
    max_offset: int | None = None      # next logical offset per the queue index (consumequeue / partition)


@dataclass
class TopicStat:
    topic: str
    messages: int = 0
    bytes: int = 0
    first_store_time: int | None = None
    last_store_time: int | None = None
    queues: list[QueueStat] = field(default_factory=list)


@dataclass
class ConsumerLag:
    group: str
    topic: str
    queue: int | str
    committed: int
    max_offset: int | None
    lag: int | None
    source: str | None = None


@dataclass
class GroupLag:
    """The lag of one consumer group on one topic: its committed queues summed."""
    group: str
    topic: str
    queues: int                         # queues/partitions with a committed offset
    committed: int                      # sum of the committed offsets
    max_offset: int | None              # sum of their queue ends (None: no end known)
    lag: int | None                     # sum of the known lags (None: no end known)
    unknown_ends: int = 0               # queues whose end is not known (not in the lag)


def group_lags(consumers: list[ConsumerLag]) -> list[GroupLag]:
    """Per (group, topic), biggest lag first."""
    agg: dict[tuple[str, str], GroupLag] = {}
    for c in consumers:
        g = agg.get((c.group, c.topic))
        if g is None:
            g = agg[(c.group, c.topic)] = GroupLag(c.group, c.topic, 0, 0, None, None)
        g.queues += 1
        g.committed += c.committed
        if c.lag is None:
            g.unknown_ends += 1
            continue
        g.max_offset = (g.max_offset or 0) + c.max_offset
        g.lag = (g.lag or 0) + c.lag
    return sorted(agg.values(), key=lambda g: (-(g.lag or 0), g.group, g.topic))


@dataclass
class DamageRange:
    file: str
    position: int | None
    offset: int | None
    length: int
    code: str
    message: str
    time_before: int | None = None     # store time of the last good message before it (same stream)
    time_after: int | None = None      # ... and of the first one after it


@dataclass
class Bucket:
    start: int
    count: int
    bytes: int
    damaged: bool


@dataclass
class Timeline:
    bucket_ms: int | None
    bucket: str | None
    start: int | None
    end: int | None
    buckets: list[Bucket] = field(default_factory=list)
    implausible: int = 0               # messages whose store time was left out (see PLAUSIBLE_FROM_MS)
    peak: int = 0


@dataclass
class StoreInfo:
    family: str
    path: str
    store_kind: str
    version_hints: list[str]
    overview: dict[str, Any]
    files: list[FileGroup]
    messages: int
    bytes: int
    first_store_time: int | None
    last_store_time: int | None
    topics: list[TopicStat]
    consumers: list[ConsumerLag]
    crash: dict[str, Any]
    timeline: Timeline
    damage: list[DamageRange]
    damage_total: int
    damaged_bytes: int
    notes: list[str]
    log_files: list[dict] = field(default_factory=list)   # {stream, file, base, size}: the append-only logs
    geometry: dict = field(default_factory=dict)           # size name -> {value(s), from, evidence}
    consumer_groups: list[GroupLag] = field(default_factory=list)   # lag per (group, topic): the consumers summed

    def to_dict(self) -> dict:
        d = asdict(self)
        d = {"kind": "info", **d}
        return d


# ---- the builder ----------------------------------------------------------------------------------

class _Hist:
    """Message counts (and bytes) by store time with bounded memory: coarsens its resolution as it grows."""

    def __init__(self):
        self.res = 1
        self.counts: dict[int, list[int]] = {}

    def add(self, ms: int, size: int) -> None:
        k = ms // self.res
        c = self.counts.get(k)
        if c is None:
            self.counts[k] = [1, size]
            if len(self.counts) > _HIST_MAX_KEYS:
                self._coarsen()
        else:
            c[0] += 1
            c[1] += size

    def _coarsen(self) -> None:
        while len(self.counts) > _HIST_MAX_KEYS // 4:
            # the next width that is a multiple of the current one, so no key straddles two new keys
            nxt = next((b for b in BUCKETS_MS if b > self.res and b % self.res == 0), self.res * 2)
            new: dict[int, list[int]] = {}
            for k, (n, b) in self.counts.items():
                nk = (k * self.res) // nxt
                c = new.setdefault(nk, [0, 0])
                c[0] += n
                c[1] += b
            self.counts, self.res = new, nxt


class InfoBuilder:
    """What a family collector fills in; see the module docstring for the contract."""

    def __init__(self, family: str, path: str, store_kind: str = "store"):
        self.family = family
        self.path = str(path)
        self.store_kind = store_kind
        self.version_hints: list[str] = []
        self.overview: dict[str, Any] = {}
        self.files: list[FileGroup] = []
        self.notes: list[str] = []
        self.crash: dict[str, Any] = {"unclean": None, "detail": "unknown", "files": []}
        self._queues: dict[tuple[str, Any], QueueStat] = {}
        self._queue_ends: dict[tuple[str, Any], int] = {}
        self._offsets: list[tuple[str, str, Any, int, str | None]] = []
        self._hist = _Hist()
        self._implausible = 0
        self._last_time: dict[Hashable, int] = {}
        self._open_damage: dict[Hashable, list[DamageRange]] = {}
        self.damage: list[DamageRange] = []
        self.log_files: list[dict] = []
        self.sizes: dict = {}
        self.damage_total = 0
        self.damaged_bytes = 0
        #: damage counted as verify counts it (:class:`mqtool.causes.DamageSpans`): per offset space, ranges
        #: that touch are one; Kafka sets ``damage_by_file`` (positions in each ``.log``, as its verify does)
        self._spans: dict = {}
        self._unplaced = [0, 0]          # ranges with no offset or position: (count, bytes)
        self.damage_by_file = False
        self.messages = 0
        self.bytes = 0
        self.first = None
        self.last = None
        self._now_ms = int(time.time() * 1000)

    # -- identity / facts --
    def hint(self, text: str) -> None:
        """A version hint ("message magic v2: written by a 5.x broker")."""
        if text not in self.version_hints:
            self.version_hints.append(text)

    def fact(self, label: str, value: Any) -> None:
        """One line of the overview (label → value; values are JSON-able)."""
        self.overview[label] = value

    def note(self, text: str) -> None:
        self.notes.append(text)

    def size(self, name: str, decided: dict, text: str, warning: str | None = None) -> None:
        """A store size and where it came from: ``geometry`` in ``info --json``, a line of the overview, and
        a note when the store could not settle it."""
        self.sizes[name] = decided
        self.overview[name] = text
        if warning:
            self.note(f"warning: {warning}")

    def add_files(self, group: str, count: int, nbytes: int, detail: str | None = None) -> None:
        self.files.append(FileGroup(group, count, nbytes, detail))

    def add_log_file(self, file: str, base: int, size: int, stream: Hashable = None) -> None:
        """One file of an append-only log (commitlog segment, Kafka .log), for the damage map."""
        self.log_files.append({"stream": None if stream is None else str(stream), "file": str(file),
                               "base": base, "size": size})

    def set_crash(self, unclean: bool | None, detail: str, files: list[str] | None = None) -> None:
        self.crash = {"unclean": unclean, "detail": detail, "files": list(files or [])}

    # -- content, in log order per stream --
    def add_message(self, topic: str, queue: Any, store_ms: int, size: int, stream: Hashable = None) -> None:
        key = (topic, queue)
        q = self._queues.get(key)
        if q is None:
            q = self._queues[key] = QueueStat(queue)
        q.messages += 1
        q.bytes += size
        self.messages += 1
        self.bytes += size
        if not self._plausible(store_ms):
            self._implausible += 1
            return
        if q.first_store_time is None or store_ms < q.first_store_time:
            q.first_store_time = store_ms
        if q.last_store_time is None or store_ms > q.last_store_time:
            q.last_store_time = store_ms
        if self.first is None or store_ms < self.first:
            self.first = store_ms
        if self.last is None or store_ms > self.last:
            self.last = store_ms
        self._hist.add(store_ms, size)
        self._last_time[stream] = store_ms
        pend = self._open_damage.pop(stream, None)
        if pend:
            for d in pend:
                d.time_after = store_ms

    def add_damage(self, file: str, position: int | None, offset: int | None, length: int, code: str,
                   message: str, stream: Hashable = None, at_time: int | None = None) -> None:
        """A damaged byte range. ``at_time``: the damaged record's own store time when it is known (e.g. a
        message whose body CRC fails); otherwise the range is placed between its neighbours in ``stream``.

        Give what the family's verify reports as damaged (its root findings' spans): ranges that overlap one
        already given, or adjoin it where neither is a whole unit (``code``: :func:`mqtool.causes.whole_unit`),
        are one range, as verify's summary counts them (the earlier one grows)."""
        length = max(0, length)
        at = position if self.damage_by_file or offset is None else offset
        space = file if self.damage_by_file or offset is None else None
        if at is None:
            self._unplaced[0] += 1
            self._unplaced[1] += length
        else:
            from mqtool.causes import DamageSpans, whole_unit

            sp = self._spans.get(space)
            if sp is None:
                sp = self._spans[space] = DamageSpans()
            r, gone = sp.join(at, at + length, None, whole=whole_unit(code))
            if gone:                           # it bridges ranges given before: they are now one (r[2])
                drop = {id(g[2]) for g in gone}
                self.damage = [d for d in self.damage if id(d) not in drop]
            if r[2] is not None:               # joins a range given before: that one grows
                _grow(r[2], r[0], r[1], file, position, offset, at)
                return
            r[2] = d = DamageRange(file, position, offset, length, code, message)
            self._place(d, stream, at_time)
            return
        self._place(DamageRange(file, position, offset, length, code, message), stream, at_time)

    def _place(self, d: DamageRange, stream: Hashable, at_time: int | None) -> None:
        if at_time is not None and self._plausible(at_time):
            d.time_before = d.time_after = at_time
        else:
            d.time_before = self._last_time.get(stream)
            self._open_damage.setdefault(stream, []).append(d)
        if len(self.damage) < MAX_DAMAGE_KEPT:
            self.damage.append(d)

    def set_queue_end(self, topic: str, queue: Any, max_offset: int) -> None:
        """Next logical offset of a queue/partition as its index says (consumequeue, log end offset)."""
        self._queue_ends[(topic, queue)] = max_offset

    def add_consumer_offset(self, group: str, topic: str, queue: Any, committed: int,
                            source: str | None = None) -> None:
        self._offsets.append((group, topic, queue, committed, source))

    def _plausible(self, ms: int) -> bool:
        return PLAUSIBLE_FROM_MS <= ms <= self._now_ms + 365 * 86_400_000

    # -- derive --
    def finish(self, opts: InfoOptions | None = None) -> StoreInfo:
        opts = opts or InfoOptions()
        topics: dict[str, TopicStat] = {}
        keys = set(self._queues) | set(self._queue_ends)
        for (t, q) in sorted(keys, key=lambda k: (k[0], _sort_key(k[1]))):
            qs = self._queues.get((t, q)) or QueueStat(q)
            qs.max_offset = self._queue_ends.get((t, q))
            ts = topics.setdefault(t, TopicStat(t))
            ts.queues.append(qs)
            ts.messages += qs.messages
            ts.bytes += qs.bytes
            for attr, pick in (("first_store_time", min), ("last_store_time", max)):
                v = getattr(qs, attr)
                if v is not None:
                    cur = getattr(ts, attr)
                    setattr(ts, attr, v if cur is None else pick(cur, v))
        consumers = []
        for group, topic, queue, committed, source in self._offsets:
            end = self._queue_ends.get((topic, queue))
            lag = max(0, end - committed) if end is not None else None
            consumers.append(ConsumerLag(group, topic, queue, committed, end, lag, source))
        consumers.sort(key=lambda c: (-(c.lag or 0), c.group, c.topic, _sort_key(c.queue)))
        timeline = self._timeline(opts)
        if self._implausible:
            self.note(f"{self._implausible} messages have an implausible store time (before 2001 or in the "
                      "future) and are left out of the timeline")
        self.damage_total = self._unplaced[0] + sum(len(sp.roots) for sp in self._spans.values())
        self.damaged_bytes = self._unplaced[1] + sum(sp.totals()[1] for sp in self._spans.values())
        return StoreInfo(self.family, self.path, self.store_kind, self.version_hints, self.overview, self.files,
                         self.messages, self.bytes, self.first, self.last,
                         sorted(topics.values(), key=lambda t: (-t.bytes, t.topic)), consumers, self.crash,
                         timeline, self.damage, self.damage_total, self.damaged_bytes, self.notes,
                         self.log_files, self.sizes, group_lags(consumers))

    def _timeline(self, opts: InfoOptions) -> Timeline:
        h = self._hist
        if self.first is None:
            return Timeline(None, None, None, None, [], self._implausible, 0)
        span = self.last - self.first + 1
        max_b = max(1, opts.max_buckets)
        if opts.bucket_ms:
            width = max(opts.bucket_ms, h.res)
            if width % h.res:
                width = next((b for b in BUCKETS_MS if b >= width and b % h.res == 0), width)
        else:
            width = next((b for b in BUCKETS_MS if b >= h.res and b % h.res == 0
                          and (self.last // b - self.first // b + 1) <= max_b), None)
            if width is None:
                width = BUCKETS_MS[-1]
                while self.last // width - self.first // width + 1 > max_b:
                    width *= 2
        start = (self.first // width) * width
        n = self.last // width - self.first // width + 1
        if n > 100_000:
            raise ValueError(f"--bucket {bucket_label(width)} gives {n} buckets over {span} ms; choose a wider one")
        counts = [[0, 0] for _ in range(n)]
        for k, (c, b) in h.counts.items():
            i = (k * h.res - start) // width
            if 0 <= i < n:
                counts[i][0] += c
                counts[i][1] += b
        damaged = [False] * n
        for d in self.damage:
            lo = d.time_before if d.time_before is not None else d.time_after
            hi = d.time_after if d.time_after is not None else d.time_before
            if lo is None:
                continue
            a = max(0, (lo - start) // width)
            z = min(n - 1, (hi - start) // width)
            for i in range(a, z + 1):
                damaged[i] = True
        buckets = [Bucket(start + i * width, c, b, damaged[i]) for i, (c, b) in enumerate(counts)]
        return Timeline(width, bucket_label(width), start, start + n * width, buckets, self._implausible,
                        max((c for c, _ in counts), default=0))


def merged_buckets(tl: Timeline, max_n: int) -> tuple[list[Bucket], int | None]:
    """The timeline regrouped into wider aligned buckets so at most ``max_n`` remain (for drawing);
    returns (buckets, width in ms). The width is the next one from BUCKETS_MS that is a multiple of the
    timeline's own (or a multiple of it when none is)."""
    buckets, width = tl.buckets, tl.bucket_ms
    if max_n <= 0 or len(buckets) <= max_n or not width:
        return buckets, width
    cands = [b for b in BUCKETS_MS if b > width and b % width == 0]
    w = width
    while True:
        w = cands.pop(0) if cands else w * 2
        first, last = buckets[0].start // w, buckets[-1].start // w
        if last - first + 1 <= max_n:
            break
    out = [Bucket((first + i) * w, 0, 0, False) for i in range(last - first + 1)]
    for x in buckets:
        o = out[x.start // w - first]
        o.count += x.count
        o.bytes += x.bytes
        o.damaged = o.damaged or x.damaged
    return out, w


def _grow(d: DamageRange, start: int, end: int, file, position, offset, at: int) -> None:
    """``d`` now covers [start, end) of its offset space (a range given at ``at`` joined it)."""
    if at == start:           # the range given later begins the joined one (or where d begins): it names the start
        d.file, d.position, d.offset = file, position, offset
    d.length = end - start


def _sort_key(q):
    return (0, q, "") if isinstance(q, int) else (1, 0, str(q))


def build_info(path, fmt: str | None, opts: InfoOptions) -> StoreInfo:
    """Detect the family, run its collector, derive the model."""
    from mqtool.detect import detect
    from mqtool.families import family_module

    family = detect(path, fmt)
    b = InfoBuilder(family, str(path))
    try:
        mod = family_module(family, "info")
    except UsageError:
        mod = None
    if mod is not None:
        mod.collect(path, b, opts)
        return b.finish(opts)
    # no collector for this family yet: a basic view from its commitlog dump, when it has one
    from mqtool import info_generic

    try:
        ops = family_module(family, "ops")
        info_generic.collect(path, b, opts, ops, family)
    except UsageError:
        raise UsageError(f"info is not available for {family} stores in this build "
                         "(try `mqtool verify store` or `mqtool dump`)", str(path)) from None
    return b.finish(opts)
