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


#: Checking a candidate record (carve, a walker's resync) costs a checksum over the bytes it claims. Random
#: bytes rarely give a plausible header with a length that fits, but crafted bytes can hold one every few
#: dozen bytes, each claiming megabytes: checked one by one that is quadratic (a hang). So a search may
#: checksum at most CHECK_BUDGET_FACTOR times the bytes it covers plus a floor; past that only candidates
#: claiming at most SMALL_CANDIDATE bytes are checked and the others are counted (:attr:`CheckBudget.unchecked`).
CHECK_BUDGET_FACTOR = 8
SMALL_CANDIDATE = 1024


class CheckBudget:
    """The bytes a search may still checksum (see :data:`CHECK_BUDGET_FACTOR`)."""

    def __init__(self, budget: int):
        self.budget = budget
        self.spent = 0              # bytes the checks read so far
        self.unchecked = 0          # candidates not checked once the budget was spent

    def afford(self, claimed: int) -> bool:
        """Whether a candidate claiming ``claimed`` bytes may be checked (its checksum reads them); counted
        in :attr:`spent`, or in :attr:`unchecked` when it may not."""
        if self.spent < self.budget or claimed <= SMALL_CANDIDATE:
            self.spent += max(0, claimed)
            return True
        self.unchecked += 1
        return False
