"""Findings: what verify (and damaged-input scans) report. Data, not control flow."""
from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable

from mqtool.plainclass import dataclass, field

TYPE_CHECKING = False      # typing is not loaded at start-up (issue #20); type checkers read True
if TYPE_CHECKING:
    from typing import Any

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)


@dataclass(frozen=True)
class Finding:
    severity: str
    code: str
    file: str | None
    position: int | None
    offset: int | None
    message: str
    expected: Any = None
    actual: Any = None
    #: the damaged or missing bytes [start, end) in the log's offset space, for a finding other findings can
    #: follow from (see :mod:`mqtool.causes`); None for the others
    span: tuple[int, int] | None = None
    #: unique within a run; set by :func:`mqtool.causes.link`
    id: str | None = None
    #: the id of the root finding this one follows from (None: a root)
    caused_by: str | None = None
    #: a finding about lost messages (:data:`mqtool.causes.AFTER_RANGE`): the log offset after which they were
    #: (the end of the last message seen before them), so that damage anywhere in [lost_from, offset) explains
    #: them; None: unknown
    lost_from: int | None = None

    if os.environ.get("MQTOOL_CHECK_CODES"):      # tests: every code must be registered, at a listed severity
        def __post_init__(self):
            from mqtool.codes import REGISTRY

            info = REGISTRY.get(self.code)
            if info is None:
                raise AssertionError(f"finding code {self.code!r} is not registered in mqtool/codes.py")
            if self.severity not in info.severities:
                raise AssertionError(f"finding code {self.code!r} emitted as {self.severity}, registered as "
                                     f"{'/'.join(info.severities)} in mqtool/codes.py")

    def to_dict(self) -> dict:
        return {
            "kind": "finding",
            "id": self.id,
            "severity": self.severity,
            "code": self.code,
            "file": self.file,
            "position": self.position,
            "offset": self.offset,
            "expected": self.expected,
            "actual": self.actual,
            "message": self.message,
            "caused_by": self.caused_by,
        }


@dataclass
class Summary:
    """Totals for one verify run. ``verdict`` is derived from the error count."""

    errors: int = 0
    warnings: int = 0
    infos: int = 0
    messages: int = 0
    skipped_ranges: int = 0
    skipped_bytes: int = 0
    store: str | None = None
    family: str | None = None
    consequences: int = 0          # findings that follow from another (caused_by set)
    #: byte ranges of the log reported damaged or missing (merged spans of the root findings,
    #: :meth:`mqtool.causes.Linker.damage`); None before linking: the ranges the reader skipped
    damaged_ranges: int | None = None
    damaged_bytes: int | None = None
    by_code: Counter = field(default_factory=Counter)
    by_file: Counter = field(default_factory=Counter)
    extra: dict = field(default_factory=dict)

    def add(self, f: Finding) -> None:
        if f.severity == ERROR:
            self.errors += 1
        elif f.severity == WARNING:
            self.warnings += 1
        else:
            self.infos += 1
        self.by_code[(f.severity, f.code)] += 1
        self.by_file[f.file or "-"] += 1

    def add_all(self, findings: Iterable[Finding]) -> None:
        for f in findings:
            self.add(f)

    @property
    def verdict(self) -> str:
        if self.errors:
            return "damaged"
        if self.warnings:
            return "sound-with-warnings"
        return "sound"

    def to_dict(self) -> dict:
        d = {
            "kind": "summary",
            "store": self.store,
            "family": self.family,
            "verdict": self.verdict,
            "errors": self.errors,
            "warnings": self.warnings,
            "infos": self.infos,
            "consequences": self.consequences,
            "messages": self.messages,
            # one definition for verify and report: the log's bytes that root findings report damaged or missing
            "damaged_ranges": self.skipped_ranges if self.damaged_ranges is None else self.damaged_ranges,
            "damaged_bytes": self.skipped_bytes if self.damaged_bytes is None else self.damaged_bytes,
            "skipped_ranges": self.skipped_ranges,
            "skipped_bytes": self.skipped_bytes,
        }
        d.update(self.extra)
        return d


#: How far a broker's clock may run ahead of the machine reading the store before a stored time is "future".
CLOCK_SKEW_MS = 60 * 60 * 1000


class KeptFindings:
    """The findings of a view that orders them only after the last one came (verify's terminal views: roots
    by severity with their consequences, tables by severity), kept in arrival order: in memory up to
    :data:`KEPT_IN_MEMORY`, past that every one in a scratch SQLite database (:func:`mqtool.io.scratch_db`), so
    the memory a run takes does not grow with their number (a hostile index of 8 Mi wrong entries makes ~17 M).
    Both give the same orders (stable: arrival order within a severity). ``rank``: severity -> sort key."""

    def __init__(self, rank, limit: int | None = None) -> None:
        self.rank = rank
        self.limit = KEPT_IN_MEMORY if limit is None else limit
        self.mem: list[Finding] = []
        self.count = 0
        self._db = self._spool = None
        self._rows: list = []           # rows not yet inserted
        self._stored = 0                # rows inserted

    def extend(self, findings: Iterable[Finding]) -> "KeptFindings":
        for f in findings:
            self.count += 1
            if self._db is None:
                self.mem.append(f)
                if len(self.mem) > self.limit:
                    self._spill()
            else:
                self._add(f)
        self._flush()
        return self

    def _spill(self) -> None:
        from mqtool.io import Spool, scratch_db

        self._spool = Spool()
        self._db = scratch_db(self._spool.dir)
        self._db.execute("CREATE TABLE f (seq INTEGER PRIMARY KEY, sev INTEGER, is_root INTEGER, key TEXT, "
                         "grp TEXT, data BLOB)")
        kept, self.mem = self.mem, []
        for f in kept:
            self._add(f)

    def _add(self, f: Finding) -> None:
        import pickle

        seq = len(self._rows) + self._stored
        key = f.id if f.id is not None else f"#{seq}"          # (a plain id: "F<n>")
        root = f.caused_by is None
        self._rows.append((seq, self.rank(f.severity), root, key, key if root else f.caused_by,
                           pickle.dumps(f, pickle.HIGHEST_PROTOCOL)))
        if len(self._rows) >= 10_000:
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            self._db.execute("BEGIN")           # (one transaction a batch: autocommit writes every row)
            self._db.executemany("INSERT INTO f VALUES (?, ?, ?, ?, ?, ?)", self._rows)
            self._db.execute("COMMIT")
            self._stored += len(self._rows)
            self._rows = []

    def _query(self, sql: str):
        import pickle

        for (data, *rest) in self._db.execute(sql):
            yield (pickle.loads(data), *rest)

    def by_severity(self):
        """Every finding, by severity."""
        if self._db is None:
            return iter(sorted(self.mem, key=lambda f: self.rank(f.severity)))
        return (f for (f,) in self._query("SELECT data FROM f ORDER BY sev, seq"))

    def roots(self, consequences: bool = False):
        """(finding, is_root): the roots by severity; with ``consequences`` each followed by the findings that
        follow from it (``caused_by`` its id), in arrival order."""
        if self._db is not None:
            if not consequences:
                return ((f, True) for (f,) in self._query("SELECT data FROM f WHERE is_root ORDER BY sev, seq"))
            self._db.execute("CREATE INDEX IF NOT EXISTS f_grp ON f (grp, seq)")
            return ((f, bool(r)) for f, r in self._query(
                "SELECT c.data, c.is_root FROM f AS r JOIN f AS c ON c.grp = r.key WHERE r.is_root "
                "ORDER BY r.sev, r.seq, c.is_root DESC, c.seq"))
        return self._roots_in_memory(consequences)

    def _roots_in_memory(self, consequences: bool):
        by_root: dict[str, list] = {}
        roots = []
        for f in self.mem:
            if f.caused_by is None:
                roots.append(f)
            elif consequences:
                by_root.setdefault(f.caused_by, []).append(f)
        roots.sort(key=lambda f: self.rank(f.severity))
        for r in roots:
            yield r, True
            for c in by_root.get(r.id, ()):
                yield c, False

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._spool.close()
            self._db = self._spool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


#: findings a :class:`KeptFindings` holds in memory before it moves them all to disk (~1 KB each)
KEPT_IN_MEMORY = 50_000


def checkpoint_value_problems(name: str, value: int, *, time: bool = False, log_end: int | None = None,
                              now_ms: int | None = None) -> list[tuple]:
    """What is wrong with one value a checkpoint stores, as (severity, code, message, expected, actual).

    Every family's checkpoint holds offsets and epoch-millisecond times, which a broker never writes
    negative; a time later than now (plus :data:`CLOCK_SKEW_MS`) was not written by a working clock; an
    offset past ``log_end`` (the end of the data present) claims data that is not there.
    """
    import time as _time

    if value < 0:
        return [(ERROR, "checkpoint-negative", f"{name} is {value}: a broker never stores a negative "
                 f"{'time' if time else 'offset or count'} (garbage or overwritten bytes)", ">= 0", value)]
    if time:
        now = int(_time.time() * 1000) if now_ms is None else now_ms
        if value > now + CLOCK_SKEW_MS:
            # the reading time is not in the finding: the same store gives the same findings on every run
            return [(WARNING, "checkpoint-future", f"{name} is {value}, more than {CLOCK_SKEW_MS // 60000} minutes "
                     "after the time of this check: a wrong broker clock, or not a time at all",
                     f"<= now + {CLOCK_SKEW_MS // 60000} min", value)]
    elif log_end is not None and value > log_end:
        return [(WARNING, "checkpoint-beyond-log-end", f"{name} is {value}, beyond the end of the log ({log_end}): "
                 "data the broker had written is not in these files (lost, truncated, or copied at different "
                 "moments)", f"<= {log_end}", value)]
    return []


# ---- born time versus store time (RocketMQ, LiteMQ) -----------------------------------------------------------

#: how far a producer's born time may lie before the broker's store time: a retry, a DLQ move, a scheduled
#: or timer message keeps its born time and is stored again later (days, by the broker's defaults); a year
#: more is no such delay but a wrong clock or a damaged field
BORN_BEFORE_STORE_MS = 366 * 24 * 3600 * 1000
#: how far it may lie after the store time (producer and broker clocks apart)
BORN_AFTER_STORE_MS = 24 * 3600 * 1000


def born_plausible(born: int, stored: int) -> bool:
    return -BORN_AFTER_STORE_MS <= stored - born <= BORN_BEFORE_STORE_MS


def born_finding(file, position, offset, born: int, stored: int) -> Finding:
    """The warning for a born time no delay or clock skew explains (e.g. 1970 in a message stored in 2026)."""
    from mqtool.columns import iso_ms

    how = "before" if born < stored else "after"
    return Finding(WARNING, "born-timestamp-implausible", file, position, offset,
                   f"born time {iso_ms(born)} is {abs(stored - born) // 86_400_000} days {how} the store time "
                   f"{iso_ms(stored)}: a wrong producer clock or a damaged field", stored, born)
