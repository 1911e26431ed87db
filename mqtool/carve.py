"""``mqtool carve IMAGE...``: records of every family found in arbitrary bytes (disk images, unallocated
space, core files, partial segments), at any byte alignment.

This module only dispatches: each family's ``mqtool/<family>/carve.py`` has

* ``carve(buf, image, opts, tick) -> (run, unit)...`` — its search and contiguous walk (see there for the
  checks a record must pass; nothing is reported that does not pass them all);
* ``rows(unit, opts) -> (kind, claimed offset, dump row)...`` — the family's usual dump row(s);
* ``Salvage(out)`` with ``add_run(buf, start, end, first, last)`` and ``close(failed)`` — the carved runs
  written back as store files of the family (``--salvage-out``).

Each image is read once per family (mapped read-only, a page window at a time); rows come per image, per
family, in image order. A carve row is ``family``, ``kind``, ``image``, ``image_position`` and then the
family's dump row without its ``kind``/``file``/``position``, with ``offset`` the offset the record claims.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from mqtool.errors import InputError
from mqtool.families import family_module
from mqtool.io import map_input, prepare_output_dir
from mqtool.options import CarveOptions
from mqtool.progress import progress

#: the families carve searches for, in the order of its passes
FAMILIES = ("rocketmq", "kafka", "litemq")
_DROP = ("kind", "file", "position")


@dataclass
class CarveSummary:
    images: int = 0
    bytes_scanned: int = 0
    carved: dict = field(default_factory=dict)          # family -> records (units, entries) carved
    runs: dict = field(default_factory=dict)            # family -> contiguous runs
    salvage_files: dict = field(default_factory=dict)   # family -> files written with --salvage-out
    salvage_out: str | None = None

    @property
    def total(self) -> int:
        return sum(self.carved.values())

    def to_dict(self) -> dict:
        return {"kind": "summary", "images": self.images, "bytes_scanned": self.bytes_scanned,
                "carved": dict(self.carved), "runs": dict(self.runs), "salvage_out": self.salvage_out,
                "salvage_files": dict(self.salvage_files)}


def carve(images: list[str], opts: CarveOptions, summary: CarveSummary) -> Iterator[dict]:
    """The carve rows of ``images`` (see the module doc); ``summary`` is filled in as they go."""
    mods = {fam: family_module(fam, "carve") for fam in opts.families}
    for fam in opts.families:
        summary.carved.setdefault(fam, 0)
        summary.runs.setdefault(fam, 0)
    sizes = []
    for image in images:                 # every image readable before anything is written
        with map_input(image) as mi:
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
                with map_input(image) as mi:
                    buf, n = mi.buf, len(mi.buf)
                    for fam, mod in mods.items():
                        yield from _family(fam, mod, buf, image, opts, summary, salvages.get(fam),
                                           lambda pos, b=base: bar.update_to(b + pos))
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


def _family(fam, mod, buf, image, opts, summary, salvage, tick) -> Iterator[dict]:
    carved = summary.carved
    start = first = last = None
    for run, unit in mod.carve(buf, image, opts, tick):
        if run != start:
            if salvage is not None and first is not None:
                salvage.add_run(buf, start, last.position + last.size, first, last)
            start, first = run, unit
            summary.runs[fam] += 1
        last = unit
        carved[fam] += 1
        pos = unit.position
        for kind, claimed, r in mod.rows(unit, opts):
            row = {"family": fam, "kind": kind, "image": image, "image_position": pos}
            for k in _DROP:
                r.pop(k, None)
            row.update(r)
            row["offset"] = claimed
            yield row
    if salvage is not None and first is not None:
        salvage.add_run(buf, start, last.position + last.size, first, last)
