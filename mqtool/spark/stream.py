"""Structured Streaming for the ``mqtool`` data source: ``spark.readStream.format("mqtool")`` tails live stores.

A store is a set of **streams**, each an append-only log cut into segments: the commitlog of a RocketMQ or
LiteMQ store (one stream, ``"commitlog"``), every partition directory of a Kafka log dir (one stream each,
named by the directory; ``.checkpoint`` snapshots are not streamed). The offset of a micro-batch is, per
store and stream, where the complete data read so far ends::

    {"<store>": {"<stream>": {"file": "<segment name>", "position": <next byte in it>,
                              "resume": <position of the last unit read, -1 at a segment start>,
                              "closed": <the segment is read to its end and holds no more data>,
                              "offset": <RocketMQ/LiteMQ: global commitlog offset of position;
                                         Kafka: offset of the next record>}}}

``latestOffset`` walks each stream on the driver from the previous end with the family's own range reader
(the rows of ``dump``) and stops after the **last complete, valid unit** (RocketMQ: a message whose body CRC
holds, or a BLANK; Kafka: a batch with a valid CRC; LiteMQ: a record of the live chain). What follows it —
zero fill, a unit still being written, damage with nothing valid after it yet — is left for a later batch:
damage is part of a batch only once a valid unit follows it (or the segment is closed). A segment is closed,
and the stream goes on in the next one, when its data reaches the file end (RocketMQ BLANK or an exactly
full file; LiteMQ's only rollover rule) or (RocketMQ, Kafka) when a later segment of the stream holds data.

A micro-batch's partitions are the batch source's byte ranges clipped to ``[start, end)`` of every stream.
The first range of a stream re-reads from ``resume`` (the last unit of the previous batch, whose row is
dropped), so that damage lying right at the previous end is reported by the walk that meets it, as the batch
source reports it; rows and damage at or after the end are dropped and the walk stops there. Damage follows
``mode`` as in the batch source (PERMISSIVE / DROPMALFORMED / FAILFAST, ``columnNameOfCorruptRecord``,
``rows=damage``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxRows, SupportsTriggerAvailableNow

from mqtool.errors import UsageError
from mqtool.ranges import DEFAULT_SPLIT_SIZE, family_ranges, parse_size
from mqtool.spark import schema as S
from mqtool.spark.source import (MqtoolDataSource, MqtoolReader, ReadFailed, _truthy, damage_record,
                                  group_ranges)

_WHOLE = 1 << 62            # a split size / stop beyond any file: one range per segment, read to the file end


class _PastEnd(Exception):
    """Raised from a damage callback to stop a walk that reached the end of the batch."""


@dataclass(frozen=True)
class Piece:
    """One byte range of a micro-batch: the range reader runs over ``rng`` (from ``resume`` for the first
    range of a stream), and only rows and damage at positions in ``[lo, hi)`` count (``hi`` None: the file end)."""

    rng: object
    lo: int
    hi: int | None

    @property
    def length(self) -> int:
        return self.rng.length


class StreamPartition(InputPartition):
    def __init__(self, pieces):
        self.pieces = list(pieces)


def stream_key(family: str, rng) -> str | None:
    """The stream a segment belongs to (None: not streamed)."""
    if family != "kafka":
        return "commitlog"
    from mqtool.kafka import store as L

    from pathlib import Path

    p = Path(rng.file)
    if L.file_kind(p) != "log":
        return None         # KRaft snapshots and bootstrap.checkpoint: written whole, not appended
    return p.parent.name


def list_streams(store: str, family: str, split: int | None = None) -> dict[str, list]:
    """Every stream of a store → its segments' ranges in log order (``split`` None: one range per segment)."""
    out: dict[str, list] = {}
    for r in family_ranges(family).plan(store, split or _WHOLE):
        key = stream_key(family, r)
        if key is not None:
            out.setdefault(key, []).append(r)
    return out


def _segments(ranges) -> list:
    """First range of every segment, in order."""
    seen, out = set(), []
    for r in ranges:
        if r.file not in seen:
            seen.add(r.file)
            out.append(r)
    return out


def is_unit(family: str, row: dict) -> bool:
    """A complete, valid unit (a batch may end after it)."""
    kind = row.get("kind")
    if family == "rocketmq":
        return kind == "blank" or (kind == "message" and row.get("crc_ok") is not False)
    if family == "kafka":
        return kind == "batch" and row.get("crc_ok") is True
    return kind == "message"


def bounded_rows(rng, lo: int, hi: int | None, opts, on_damage):
    """The family's range rows of ``rng`` whose position lies in ``[lo, hi)``, damage likewise; the walk stops
    at the first row or damage at or after ``hi``. Damage reports without a position (one-line notes) are held
    until the next row: they belong to it, and are dropped with it when it lies past the end."""
    held: list = []

    def note(d):
        p = getattr(d, "position", None)
        if p is not None:
            if hi is not None and p >= hi:
                raise _PastEnd
            if p < lo:
                return
        held.append(d)

    rows = family_ranges(rng.family).iter_range_rows(rng, opts, on_damage=note)
    try:
        for row in rows:
            p = row.get("position")
            if p is not None and hi is not None and p >= hi:
                held.clear()
                break
            if p is not None and p < lo:
                held.clear()
                continue
            for d in held:
                on_damage(d)
            held.clear()
            yield row
    except _PastEnd:
        pass
    finally:
        rows.close()
    for d in held:
        on_damage(d)


class MqtoolStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("mqtool")``: see the module doc. Options as the batch source (``rows`` =
    messages or damage) plus ``startingOffsets`` (earliest | latest) and ``maxBytesPerTrigger``."""

    def __init__(self, options, stores, mode, fields):
        if mode == "verify":
            raise UsageError("mqtool data source: rows=verify cannot be streamed (messages or damage)")
        self.options = options
        self.stores = stores
        self.reader = MqtoolReader(options, stores, mode, fields)
        self.fields = fields
        self.starting = str(options.get("startingOffsets") or "earliest").strip().lower()
        if self.starting not in ("earliest", "latest"):
            raise UsageError(f"mqtool data source: startingOffsets {self.starting!r} (earliest or latest)")
        mb = options.get("maxBytesPerTrigger")
        self.max_bytes = parse_size(mb) if mb else None
        self.ignore_missing = _truthy(options.get("ignoreMissingFiles", "false"))
        self.target: dict | None = None
        self.available_now = False

    # ---- driver: offsets ---------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        if self.starting == "latest":
            return self._advance({}, None, None)
        return {p: {} for p, _ in self.stores}

    def getDefaultReadLimit(self):
        if self.max_bytes:
            return ReadMaxBytes(self.max_bytes)
        return super().getDefaultReadLimit()

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = True       # the target is what the first latestOffset finds

    def latestOffset(self, start: dict, limit=None) -> dict:
        if self.available_now and self.target is None:
            self.target = self._advance(start, None, None)
        budget = None
        if isinstance(limit, ReadMaxBytes):
            budget = ["bytes", limit.max_bytes]
        elif isinstance(limit, ReadMaxRows):
            budget = ["rows", limit.max_rows]
        return self._advance(start, budget, self.target)

    def _advance(self, start: dict, budget, bound) -> dict:
        out: dict = {}
        first = [True]      # a limited batch takes at least one unit
        for store, family in self.stores:
            have = (start or {}).get(store) or {}
            now = {}
            for key, ranges in list_streams(store, family).items():
                lim = ((bound or {}).get(store) or {}).get(key) if bound is not None else None
                if bound is not None and lim is None:
                    continue        # appeared after the availableNow target was taken
                now[key] = self._walk(family, _segments(ranges), have.get(key), budget, lim, first)
            for key, st in have.items():
                now.setdefault(key, st)     # a stream whose files are all gone keeps its offset
            out[store] = now
        return out

    def _locate(self, segs, st):
        """(index of the stream's current segment, state) — the state moved on to the next segment when its
        own is gone (retention): a loss unless it was read to its end, which fails unless ignoreMissingFiles."""
        if not st:
            return 0, {"file": segs[0].name, "position": 0, "resume": -1, "closed": False}
        names = [s.name for s in segs]
        if st["file"] in names:
            return names.index(st["file"]), st
        later = [i for i, n in enumerate(names) if n > st["file"]]
        if not later:
            return None, st
        if not st.get("closed") and not self.ignore_missing:
            gone = os.path.join(os.path.dirname(segs[later[0]].file), st["file"])
            raise ReadFailed("missing", gone, f"segment {st['file']} of the stream was deleted before it "
                             f"was read to its end (at position {st['position']}); set ignoreMissingFiles to go on "
                             "from the next segment")
        return later[0], {"file": names[later[0]], "position": 0, "resume": -1, "closed": False}

    def _walk(self, family, segs, st, budget, lim, first) -> dict:
        """The state of one stream after the units from ``st`` on (``budget``: what the read limit leaves,
        shared by all streams; ``lim``: the availableNow target of this stream)."""
        if not segs:
            return st or {}
        i, st = self._locate(segs, st)
        if i is None:
            return st
        pos, resume, closed = st["position"], st["resume"], st.get("closed", False)
        nxt = st.get("offset")      # Kafka: the offset of the next record
        opts = self._probe_options()
        while True:
            seg = segs[i]
            at_limit = lim is not None and lim["file"] == seg.name
            if not closed:
                rng = replace(seg, start=resume if resume >= 0 else pos, stop=_WHOLE)
                checked = resume < 0
                prev = None
                cut = False         # stopped by the availableNow target or the read limit
                for row in family_ranges(family).iter_range_rows(rng, opts, on_damage=lambda d: None):
                    p = row.get("position")
                    if p is None or not is_unit(family, row):
                        continue
                    if not checked:     # the unit the last batch ended with must still be there
                        checked = True
                        if p != resume:
                            raise ReadFailed("changed", seg.file, f"the log was rewritten or truncated under the "
                                             f"stream: no unit at position {resume} any more")
                        continue
                    if p < pos:
                        continue
                    end = p + row["size"]
                    if at_limit and end > lim["position"]:
                        cut = True
                        break
                    if budget is not None:
                        cost = row["size"] if budget[0] == "bytes" else 1
                        if cost > budget[1] and not first[0]:
                            budget[1] = 0       # the batch is full
                            cut = True
                            break
                        budget[1] -= cost
                    first[0] = False
                    prev = (pos, resume, row) if row.get("kind") == "message" else None
                    pos, resume = end, p
                    if row.get("last_offset") is not None:
                        nxt = row["last_offset"] + 1
                if not checked and resume >= 0 and pos > 0:
                    raise ReadFailed("changed", seg.file, f"the log was rewritten or truncated under the stream: "
                                     f"no unit at position {resume} any more")
                if prev is not None and maybe_torn(family, prev[2], seg.file, pos):
                    pos, resume = prev[:2]      # may still be being written: the next batch takes it
                # closed: the segment is read to its end and holds no more data
                closed = not cut and self._closed(family, seg, pos, segs[i + 1:])
            if at_limit or not closed or i + 1 >= len(segs) or (budget is not None and budget[1] <= 0):
                break
            i, pos, resume, closed, nxt = i + 1, 0, -1, False, None
        out = {"file": segs[i].name, "position": pos, "resume": resume, "closed": closed}
        if family != "kafka":
            out["offset"] = segs[i].base + pos
        else:
            from pathlib import Path

            from mqtool.kafka.store import segment_base

            out["offset"] = nxt if nxt is not None else segment_base(Path(segs[i].file))
        return out

    def _closed(self, family, seg, pos, later) -> bool:
        size = _size(seg.file)
        if family != "kafka" and size is not None and pos >= size:
            return True     # exactly full (RocketMQ: the BLANK reaches the file end)
        if family == "litemq":
            return False    # LiteMQ's live data goes on in the next file only after an exactly full one
        opts = self._probe_options()
        for s in later:
            for row in family_ranges(family).iter_range_rows(replace(s, start=0, stop=_WHOLE), opts,
                                                             on_damage=lambda d: None):
                if is_unit(family, row):
                    return True
                break
        return False

    def _probe_options(self):
        from mqtool.options import DumpOptions

        return DumpOptions(include_blank=True, max_message_size=self.reader.max_message_size)

    # ---- driver: planning --------------------------------------------------------------------------

    def partitions(self, start: dict, end: dict):
        pieces: list[Piece] = []
        r = self.reader
        for store, family in self.stores:
            ends = (end or {}).get(store) or {}
            if not ends:
                continue
            streams = list_streams(store, family, r.split or DEFAULT_SPLIT_SIZE)
            for key, e in ends.items():
                s = ((start or {}).get(store) or {}).get(key)
                if s == e or key not in streams:
                    continue
                pieces.extend(self._pieces(streams[key], s, e))
        groups = group_ranges(pieces, r.max_partitions, r.partition_bytes, r.open_cost)
        return [StreamPartition(g) for g in groups]

    def _pieces(self, ranges, s, e) -> list[Piece]:
        names = [seg.name for seg in _segments(ranges)]
        if e["file"] not in names:
            gone = os.path.join(os.path.dirname(ranges[0].file), e["file"])
            raise ReadFailed("missing", gone, f"segment {e['file']} vanished before the batch was read")
        if s:
            i, s = self._locate(_segments(ranges), s)
            first = names[i]
        else:
            first = names[0]
        out = []
        for rng in ranges:
            if not first <= rng.name <= e["file"]:
                continue
            lo, hi, begin = 0, None, rng.start
            if s and rng.name == s["file"]:
                lo = s["position"]
                begin = max(rng.start, s["resume"] if s["resume"] >= 0 else lo)
                if rng.stop <= begin:
                    continue
                if rng.start < begin:
                    rng = replace(rng, start=begin)
            if rng.name == e["file"]:
                hi = e["position"]
                if rng.start >= hi or hi <= lo:
                    continue
                if rng.stop > hi:       # the reader stops there (LiteMQ's walk reads nothing past its stop)
                    rng = replace(rng, stop=hi)
            out.append(Piece(rng, lo, hi))
        return out

    # ---- executors ---------------------------------------------------------------------------------

    def read(self, partition):
        schema = S.arrow_schema(self.fields)
        return S.to_batches(self._rows(partition.pieces), schema, self.reader.batch_rows)

    def _rows(self, pieces):
        from mqtool.io import open_input
        from mqtool.errors import InputError
        from mqtool.options import DumpOptions

        r = self.reader
        opts = DumpOptions(topic=r.topic, key=r.key, tag=r.tag, body=r.body, include_blank=r.include_blank,
                           max_message_size=r.max_message_size, deep=r.deep,
                           print_data=r.deep and r.body != "none")
        want_rows = r.mode == "messages"
        for pc in pieces:
            rng = pc.rng
            try:
                open_input(rng.file).close()
            except InputError as e:
                if r._file_fails(rng.file, e.message):
                    continue
            damage: list[dict] = []
            for row in bounded_rows(rng, pc.lo, pc.hi, opts, lambda d, rng=rng: damage.append(damage_record(rng, d))):
                yield from r._damage_rows(damage)
                if want_rows:
                    row["store"] = rng.store
                    yield row
            yield from r._damage_rows(damage)


def maybe_torn(family: str, row: dict, path, end: int) -> bool:
    """The last unit found, ending at ``end`` with a zero byte after it (not the file end), may be torn: it
    validates, yet its tail may not be written yet (a broker writes each unit with one forward copy, so a torn
    unit ends in zeros). Such a unit waits until something follows it.

    * RocketMQ: the body CRC does not cover the topic and properties after the body; a unit a broker wrote
      ends in a non-zero byte (its properties end with the 0x02 separator, else its topic ends it), so a
      unit whose last byte is zero may be torn.
    * LiteMQ: no checksum at all; every field after StoreTimestamp is zero in a broker-written record, so
      the record is whole once StoreTimestamp is: a record whose StoreTimestamp ends in a zero byte may be
      torn (1 record in 256 then waits for the next one).
    * Kafka: the batch CRC covers the whole batch."""
    if family == "rocketmq":
        b = _read(path, end - 1, 2)
        return b == b"\0\0"
    if family == "litemq":
        return (row.get("store_timestamp") or 0) & 0xFF == 0 and _read(path, end, 1) == b"\0"
    return False


def _read(path, pos: int, n: int) -> bytes:
    from mqtool.errors import InputError
    from mqtool.io import open_input

    try:
        with open_input(path, pos + n) as f:
            f.seek(pos)
            return f.read(n)
    except (OSError, InputError):
        return b""


def _size(path) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


class StreamingDataSource(MqtoolDataSource):
    """The ``mqtool`` data source as registered: the batch readers of :class:`MqtoolDataSource` plus
    Structured Streaming (``spark.readStream.format("mqtool")``)."""

    def streamReader(self, schema):
        return MqtoolStreamReader(self.options, self._stores(), self._mode(), self.row_fields())
