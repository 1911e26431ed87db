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
    """The bytes a search may still checksum (see :data:`CHECK_BUDGET_FACTOR`).

    ``strict``: a candidate is checked only when what it claims fits in what is left (or it is small), so one
    false candidate claiming far more than the budget (a plausible header inside compressed bytes whose length
    runs to the end of the file) is passed over instead of spending the whole budget and leaving none for the
    real entry after it. A walk reading its entries uses the lenient rule (any entry while the budget is not
    spent): its entries are in step, and a large real batch must be read."""

    def __init__(self, budget: int, strict: bool = False):
        self.budget = budget
        self.strict = strict
        self.spent = 0              # bytes the checks read so far
        self.unchecked = 0          # candidates not checked once the budget was spent

    def afford(self, claimed: int) -> bool:
        """Whether a candidate claiming ``claimed`` bytes may be checked (its checksum reads them); counted
        in :attr:`spent`, or in :attr:`unchecked` when it may not."""
        if claimed <= SMALL_CANDIDATE or (self.spent + claimed <= self.budget if self.strict
                                          else self.spent < self.budget):
            self.spent += max(0, claimed)
            return True
        self.unchecked += 1
        return False

    def refund(self, claimed: int) -> None:
        """An entry checked with :meth:`afford` proved valid and the walk moved past it: its bytes are paid by
        that progress (a walk checks each entry it reads once, linear in the file), not by the budget, which
        is kept for the checks that may fail (resync candidates, entries whose checksum is wrong)."""
        self.spent -= max(0, claimed)
