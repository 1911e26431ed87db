"""Findings: what verify (and damaged-input scans) report. Data, not control flow."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

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

    def to_dict(self) -> dict:
        return {
            "kind": "finding",
            "severity": self.severity,
            "code": self.code,
            "file": self.file,
            "position": self.position,
            "offset": self.offset,
            "expected": self.expected,
            "actual": self.actual,
            "message": self.message,
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
            "errors": self.errors,
            "warnings": self.warnings,
            "infos": self.infos,
            "messages": self.messages,
            "skipped_ranges": self.skipped_ranges,
            "skipped_bytes": self.skipped_bytes,
            "verdict": self.verdict,
        }
        d.update(self.extra)
        return d


#: How far a broker's clock may run ahead of the machine reading the store before a stored time is "future".
CLOCK_SKEW_MS = 60 * 60 * 1000


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
            return [(WARNING, "checkpoint-future", f"{name} is {value}, later than now ({now}) by more than "
                     f"{CLOCK_SKEW_MS // 60000} minutes: a wrong broker clock, or not a time at all",
                     f"<= {now + CLOCK_SKEW_MS}", value)]
    elif log_end is not None and value > log_end:
        return [(WARNING, "checkpoint-beyond-log-end", f"{name} is {value}, beyond the end of the log ({log_end}): "
                 "data the broker had written is not in these files (lost, truncated, or copied at different "
                 "moments)", f"<= {log_end}", value)]
    return []
