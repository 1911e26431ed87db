"""The one damage event every family's walker yields: a byte range it could not read as units.

The walk goes on after it (resync); verbs turn it into a finding (verify), a stderr note (dump, query), a
stop (rebuild) or a damaged range (info). ``code`` says what was found (``truncated-record``,
``zeroed-range``, ``skipped``, ``partial-tail``, ``zero-tail``, ``max-bytes``, ...).
"""
from __future__ import annotations

from mqtool.plainclass import dataclass


@dataclass(slots=True)
class Damage:
    file: str
    position: int                 # first byte of the range in the file
    offset: int | None            # its global (commitlog) offset, when the family's files carry one
    length: int
    code: str
    message: str
    expected: object = None
    actual: object = None

    kind = "damage"               # as Message / Blank / End events name themselves

    @property
    def end(self) -> int:
        """The first byte after the range."""
        return self.position + self.length
