"""``mqtool carve IMAGE...``: records of every family found in arbitrary bytes (disk images, unallocated
space, core files, partial segments), at any byte alignment.

This module only dispatches: each family's ``mqtool/<family>/carve.py`` has

* ``carve(buf, image, opts, scope) -> (run, unit)...`` — its search and contiguous walk (see there for the
  checks a record must pass; nothing is reported that does not pass them all), over the bytes
  :class:`Scope` leaves it;
* ``rows(unit, opts) -> (kind, claimed offset, dump row)...`` — the family's usual dump row(s) (raising
  :class:`mqtool.errors.DecodeError` when what is inside a unit does not decode: counted as ``undecodable``
  in the summary, and the next unit is carved); with
  ``opts.ndjson`` a family may instead hand over units already rendered as carve NDJSON lines (a unit with
  ``carve_lines`` and ``count``: RocketMQ's compiled lane), the same bytes the rows would give;
* ``Salvage(out)`` with ``add_run(buf, start, end, first, last)`` and ``close(failed)`` — the carved runs
  written back as store files of the family (``--salvage-out``).

Each image is searched once per family (mapped read-only, a page window at a time); bytes inside a run an
earlier pass carved are not searched again for record starts (a record's bytes belong to one record; a
record that starts outside a run may still span it). The order balances the cost: RocketMQ first (one
memchr-fast ``find`` per window; an image full of units then costs the other passes nothing), Kafka's
compiled search next (an image full of batches then costs LiteMQ nothing), LiteMQ last. Every pass checks
in full (a CRC, or LiteMQ's exact lengths), so the order changes only the speed. Rows come per
image, per family, in image order. A carve row is ``family``, ``kind``, ``image``, ``image_position`` and then the
family's dump row without its ``kind``/``file``/``position``, with ``offset`` the offset the record claims.
"""
from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass, field
from typing import Iterator

from mqtool.damage import CHECK_BUDGET_FACTOR, CheckBudget
from mqtool.errors import DecodeError, InputError
from mqtool.families import family_module
from mqtool.io import map_input, prepare_output_dir
from mqtool.ndjson import PreRenderedLines
from mqtool.options import CarveOptions
from mqtool.progress import progress

#: the families carve searches for, in the order of its passes
FAMILIES = ("rocketmq", "kafka", "litemq")
#: Each family's pass may checksum at most CHECK_BUDGET_FACTOR times the image plus CHECK_BUDGET_FLOOR bytes
#: (:class:`mqtool.damage.CheckBudget`); past that only small candidates are checked and the others are counted
#: (``unchecked`` in the summary, a note).
CHECK_BUDGET_FLOOR = 1 << 30
_DROP = ("kind", "file", "position")


@dataclass
class CarveSummary:
    images: int = 0
    bytes_scanned: int = 0
    carved: dict = field(default_factory=dict)          # family -> records (units, entries) carved
    runs: dict = field(default_factory=dict)            # family -> contiguous runs
    salvage_files: dict = field(default_factory=dict)   # family -> files written with --salvage-out
    salvage_out: str | None = None
    unchecked: dict = field(default_factory=dict)       # family -> candidates left unchecked (CHECK_BUDGET_*)
    undecodable: dict = field(default_factory=dict)     # family -> carved units whose contents did not decode
    first_undecodable: str | None = None                # "image@position: why" of the first of them

    @property
    def total(self) -> int:
        return sum(self.carved.values())

    def to_dict(self) -> dict:
        return {"kind": "summary", "images": self.images, "bytes_scanned": self.bytes_scanned,
                "carved": dict(self.carved), "runs": dict(self.runs), "salvage_out": self.salvage_out,
                "salvage_files": dict(self.salvage_files), "unchecked": dict(self.unchecked),
                "undecodable": dict(self.undecodable), "first_undecodable": self.first_undecodable}


class Scope(CheckBudget):
    """What a family's search may look at in one image: every byte but the runs earlier passes carved
    (:meth:`window`); where it has got to (:meth:`tick`, for the progress bar); and what it may still
    checksum (:meth:`afford`). The runs are kept as two sorted arrays of 8-byte integers (memory bounded by
    16 bytes a run, whatever the image holds)."""

    def __init__(self, starts: array, ends: array, tick=None, size: int = 0):
        super().__init__(CHECK_BUDGET_FACTOR * size + CHECK_BUDGET_FLOOR)
        self.starts, self.ends = starts, ends
        self._tick = tick

    def window(self, i: int, n: int) -> tuple[int, int]:
        """(the first position >= ``i`` outside every claimed run, the start of the next claimed run or
        ``n``): search [first, bound) for starts of records."""
        starts = self.starts
        k = bisect.bisect_right(starts, i) - 1
        if k >= 0 and self.ends[k] > i:
            i = self.ends[k]
        k = bisect.bisect_right(starts, i)
        return i, min(n, starts[k]) if k < len(starts) else n

    def tick(self, pos: int) -> None:
        if self._tick is not None:
            self._tick(pos)


def _merge(a: tuple[array, array], b: tuple[array, array]) -> tuple[array, array]:
    """The union of two sorted lists of runs (each disjoint and in order), coalesced."""
    starts, ends = array("q"), array("q")
    (sa, ea), (sb, eb) = a, b
    i = j = 0
    while i < len(sa) or j < len(sb):
        if j >= len(sb) or (i < len(sa) and sa[i] <= sb[j]):
            s, e = sa[i], ea[i]
            i += 1
        else:
            s, e = sb[j], eb[j]
            j += 1
        if ends and s <= ends[-1]:
            ends[-1] = max(ends[-1], e)
        else:
            starts.append(s)
            ends.append(e)
    return starts, ends


class Layers:
    """Where a salvaged run goes: the first layer (store, partition) none of whose runs overlaps its claimed
    offsets [lo, hi). Each layer keeps its runs sorted (bisect), so placing is a lookup per layer."""

    def __init__(self):
        self._layers: list[tuple[list, list]] = []

    def place(self, lo: int, hi: int) -> int:
        for k, (starts, ends) in enumerate(self._layers):
            i = bisect.bisect_left(starts, hi)          # runs starting before hi
            if i == 0 or ends[i - 1] <= lo:
                starts.insert(i, lo)
                ends.insert(i, hi)
                return k
        self._layers.append(([lo], [hi]))
        return len(self._layers) - 1


def carve(images: list[str], opts: CarveOptions, summary: CarveSummary) -> Iterator[dict]:
    """The carve rows of ``images`` (see the module doc); ``summary`` is filled in as they go."""
    mods = {fam: family_module(fam, "carve") for fam in opts.families}
    for fam in opts.families:
        summary.carved.setdefault(fam, 0)
        summary.runs.setdefault(fam, 0)
    sizes = []
    for image in images:                 # every image readable before anything is written
        with map_input(image, ranged=True) as mi:      # (its size only: a remote image is not fetched here)
            sizes.append(len(mi.buf))
    out = None
    if opts.salvage_out:
        out = prepare_output_dir(opts.salvage_out, list(images), opts.force)
        summary.salvage_out = str(opts.salvage_out)
    salvages = {fam: mod.Salvage(out) for fam, mod in mods.items()} if out is not None else {}
    done = False
    try:
        with progress(sum(sizes) * len(mods), "carve", enabled=opts.progress) as bar:
            base = 0
            for image in images:
                # whole: every family's carver searches every byte of the image (a remote image is fetched
                # whole, once, and kept while it is carved)
                with map_input(image) as mi:
                    buf, n = mi.buf, len(mi.buf)
                    claimed = (array("q"), array("q"))
                    for fam, mod in mods.items():
                        runs = (array("q"), array("q"))
                        scope = Scope(*claimed, tick=lambda pos, b=base: bar.update_to(b + pos), size=n)
                        yield from _family(fam, mod, buf, image, opts, summary, salvages.get(fam), scope, runs)
                        summary.unchecked[fam] = summary.unchecked.get(fam, 0) + scope.unchecked
                        claimed = _merge(claimed, runs)
                        if mi.faulted() or mi.shrunk():
                            raise InputError(f"the file shrank to {mi.current_size()} bytes while being read",
                                             image)
                        base += n
                        bar.update_to(base)
                summary.images += 1
                summary.bytes_scanned += n
        done = True
    finally:
        for fam, s in salvages.items():
            s.close(failed=not done)
            summary.salvage_files[fam] = s.files
        if out is not None:
            out.close()


def _family(fam, mod, buf, image, opts, summary, salvage, scope, runs: tuple) -> Iterator[dict]:
    """The rows of one family's pass; its runs go to ``runs`` (and to ``salvage``)."""
    carved = summary.carved
    start = first = last = None
    for run, unit in mod.carve(buf, image, opts, scope):
        if run != start:
            if first is not None:
                _end_run(buf, start, first, last, salvage, runs)
            start, first = run, unit
            summary.runs[fam] += 1
        last = unit
        lines = getattr(unit, "carve_lines", None)
        if lines is not None:           # units already rendered as carve NDJSON lines (a family's fast lane)
            carved[fam] += unit.count
            yield PreRenderedLines(lines)
            continue
        carved[fam] += 1
        pos = unit.position
        try:
            for kind, claimed, r in mod.rows(unit, opts):
                row = {"family": fam, "kind": kind, "image": image, "image_position": pos}
                for k in _DROP:
                    r.pop(k, None)
                row.update(r)
                row["offset"] = claimed
                yield row
        except DecodeError as e:    # the unit checks, its contents do not (a compression bomb past the cap)
            summary.undecodable[fam] = summary.undecodable.get(fam, 0) + 1
            if summary.first_undecodable is None:
                summary.first_undecodable = f"{image}@{pos}: {e.message}"
    if first is not None:
        _end_run(buf, start, first, last, salvage, runs)


def _end_run(buf, start, first, last, salvage, runs: tuple) -> None:
    end = last.position + last.size
    runs[0].append(start)
    runs[1].append(end)
    if salvage is not None:
        salvage.add_run(buf, start, end, first, last)
