"""What a consumer group never got: the family-independent part of ``mqtool query --unconsumed-by GROUP``.

A family engine (``mqtool/<family>/lag.py``) reads the group's committed offsets (RocketMQ
``config/consumerOffset.json``, Kafka ``__consumer_offsets``, LiteMQ ``checkpoint/checkpoint``; or the
``--offsets FILE`` of :func:`offsets_file`), picks the group with :func:`pick_group`, and returns
``(columns, queues, rows)``: a :class:`QueueLag` per committed queue/partition (committed offset, queue end,
unconsumed count, filled before the rows) and an iterator of the family's query rows for the messages at or
after each committed offset, each with ``group`` and ``committed_offset``. ``listed`` on a QueueLag counts the
rows given for it (it can be below ``unconsumed``: retention, holes, damage, ``--limit``).

A committed offset is the next offset the group will consume (RocketMQ and Kafka both store it so, and
LiteMQ's checkpoint holds what the client acked, read the same way): the unconsumed messages of a queue are
its logical offsets ``committed .. end-1``. Nothing here prints or reads a store file except the
``--offsets`` JSON.
"""
from __future__ import annotations

from dataclasses import dataclass

from mqtool.columns import Column
from mqtool.common import strict_json
from mqtool.errors import InputError, UsageError
from mqtool.io import read_input
from mqtool.sanitize import visible

MAX_GROUPS_SHOWN = 20
MAX_OFFSETS_FILE = 64 * 1024 * 1024


@dataclass
class Committed:
    """One committed offset as the store (or --offsets file) holds it; ``offset`` may be anything."""
    group: str
    topic: str
    queue: int
    offset: object
    source: str


@dataclass
class QueueLag:
    group: str
    topic: str
    queue: int
    committed: object
    max_offset: int | None          # the queue end: next logical offset per the queue index / log end
    unconsumed: int | None          # max_offset - committed (never negative); None when not knowable
    source: str
    listed: int = 0                 # rows given for this queue
    note: str | None = None

    def to_row(self) -> dict:
        return {"kind": "unconsumed-summary", "group": self.group, "topic": self.topic, "queue": self.queue,
                "committed_offset": self.committed, "max_offset": self.max_offset,
                "unconsumed": self.unconsumed, "listed": self.listed, "source": self.source, "note": self.note}


SUMMARY_COLUMNS = [Column("topic", "Topic", max_width=32), Column("queue", "Queue", justify="right"),
                   Column("committed_offset", "Committed", justify="right"),
                   Column("max_offset", "Queue end", justify="right"),
                   Column("unconsumed", "Unconsumed", justify="right"), Column("listed", "Listed", justify="right"),
                   Column("note", "Note", max_width=60)]


class UnknownGroupError(UsageError):
    """The group has no committed offset in the store: a finding about the store, exit 1."""

    exit_code = 1


def pick_group(entries: list[Committed], group: str, where: str) -> list[Committed]:
    """The entries of ``group``, in (topic, queue) order; :class:`UnknownGroupError` listing the known groups
    (sanitised, at most :data:`MAX_GROUPS_SHOWN`) when it has none."""
    mine = sorted((e for e in entries if e.group == group), key=lambda e: (e.topic, e.queue))
    if mine:
        return mine
    known = sorted({e.group for e in entries})
    if not known:
        listed = "none"
    else:
        listed = ", ".join(repr(visible(g[:100])) for g in known[:MAX_GROUPS_SHOWN])
        if len(known) > MAX_GROUPS_SHOWN:
            listed += f" … ({len(known) - MAX_GROUPS_SHOWN} more)"
    raise UnknownGroupError(f"group {visible(group[:100])!r} has no committed offset here; known groups "
                            f"({len(known)}): {listed}", where)


def position(e: Committed) -> tuple[int | None, str | None]:
    """The committed offset as a position (an int >= 0), else (None, why) for a negative or garbage value."""
    v = e.offset
    if isinstance(v, bool) or not isinstance(v, int):
        return None, f"committed offset {visible(repr(v)[:40])} is not an integer: position unknown, nothing listed"
    if v < 0:
        return None, f"committed offset {v} is negative: position unknown, nothing listed"
    return v, None


def queue_lag(e: Committed, end: int | None) -> QueueLag:
    """The summary of one committed queue whose end is ``end`` (None: unknown)."""
    pos, why = position(e)
    q = QueueLag(e.group, e.topic, e.queue, e.offset, end, None, e.source, note=why)
    if pos is None:
        return q
    if end is None:
        q.note = "queue end unknown (no queue index and no message of this queue in the log)"
        return q
    q.unconsumed = max(0, end - pos)
    if pos > end:
        q.note = f"committed offset is beyond the queue end {end} (a reset queue, or offsets from another store)"
    return q


def tag(row: dict, q: QueueLag) -> dict:
    """A message row of queue ``q``: the group and its committed offset added; counts it as listed."""
    row["group"] = q.group
    row["committed_offset"] = q.committed
    q.listed += 1
    return row


def offsets_file(path: str) -> list[Committed]:
    """``--offsets FILE``: committed offsets as JSON, ``{group: {topic: {queue: offset}}}`` (the shape of a
    LiteMQ checkpoint's consumer section), or RocketMQ's ``{"offsetTable": {"topic@group": {queue:
    offset}}}``. InputError (one line) when it is not readable JSON of either shape."""
    raw = read_input(path, MAX_OFFSETS_FILE + 1)
    if len(raw) > MAX_OFFSETS_FILE:
        raise InputError(f"offsets file larger than {MAX_OFFSETS_FILE} bytes", path)
    try:
        doc = strict_json(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise InputError(f"offsets file is not UTF-8 (byte {e.start})", path) from None
    except ValueError as e:
        raise InputError(f"offsets file is not JSON: {e}", path) from None
    src = f"--offsets {path}"
    if isinstance(doc, dict) and isinstance(doc.get("offsetTable"), dict):
        return offset_table(doc["offsetTable"], src, path)
    if not isinstance(doc, dict):
        raise InputError("offsets file must hold an object {group: {topic: {queue: offset}}}", path)
    out = []
    for group, topics in doc.items():
        if not isinstance(topics, dict):
            raise InputError(f"offsets file: group {visible(group[:100])!r} must map topics to queues", path)
        for topic, queues in topics.items():
            if not isinstance(queues, dict):
                raise InputError(f"offsets file: {visible(group[:100])!r}/{visible(topic[:100])!r} must map "
                                 "queue ids to offsets", path)
            for qid, off in queues.items():
                out.append(Committed(group, topic, _queue_id(qid, path), off, src))
    return out


def offset_table(table: dict, source: str, path: str) -> list[Committed]:
    """RocketMQ's ``offsetTable`` (``"topic@group" → {queueId: offset}``) as Committed entries; the group is
    after the last ``@`` (topics never hold one, group names may not either)."""
    out = []
    for tg, qmap in table.items():
        topic, sep, group = str(tg).rpartition("@")
        if not sep or not isinstance(qmap, dict):
            raise InputError(f"offsetTable key {visible(str(tg)[:100])!r} is not topic@group → {{queue: offset}}",
                             path)
        for qid, off in qmap.items():
            out.append(Committed(group, topic, _queue_id(qid, path), off, source))
    return out


def _queue_id(v, path) -> int:
    try:
        q = int(v)
    except (TypeError, ValueError):
        raise InputError(f"queue id {visible(str(v)[:40])!r} is not an integer", path) from None
    if q < 0:
        raise InputError(f"queue id {q} is negative", path)
    return q
