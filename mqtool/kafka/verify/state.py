"""What one pass over a segment's ``.log`` saw, which the index checks compare against."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SegmentSeen:
    """What one pass over a segment's .log saw (enough to check its index files)."""

    base: int
    size: int = 0
    batches: int = 0
    records: int = 0
    by_position: dict = field(default_factory=dict)      # position -> (base, last, max_ts)
    by_last: dict = field(default_factory=dict)          # lastOffset -> (position, max_ts)
    bases: list = field(default_factory=list)            # sorted base offsets (for containment lookups)
    spans: list = field(default_factory=list)            # (base, last, max_ts) parallel to bases
    aborts: set = field(default_factory=set)             # (pid, marker offset)
    epochs: list = field(default_factory=list)           # runs [epoch, first offset, last offset] of v2 PLEs
    first_offset: int | None = None
    boundary_gap: tuple | None = None                    # (previous segment's last offset, this first base)
    last_offset: int | None = None
    canonical = None                                     # SegmentIndexes from the recovery rule
    interior_gaps: int = 0
    canonical_nofinal: list | None = None
    # when a list: the (base, last offset, CRC ok) of the batches up to the first one whose CRC holds (what
    # the offset continuity with the previous segment depends on; see mqtool.kafka.verifyplan)
    head: list | None = None
