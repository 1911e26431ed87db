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
