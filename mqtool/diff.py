"""``mqtool diff A B``: which family, then that family's engine (``mqtool/<family>/diff.py``).

An engine is ``diff(a, b, tally, opts) -> iterator of difference rows``; the counts it gathers in the
:class:`~mqtool.diffcore.Tally` make the summary row. See :mod:`mqtool.diffcore` for how two copies are
compared.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from mqtool.detect import detect
from mqtool.diffcore import Tally
from mqtool.errors import UsageError
from mqtool.families import display_name, family_module


@dataclass
class DiffOptions:
    limit: int | None = None        # at most this many difference rows (the counts cover every difference)
    index: bool = True              # also consume queues and index files
    progress: bool | None = None    # None: the front end decides


def diff(a: str, b: str, fmt: str | None = None, opts: DiffOptions | None = None
         ) -> tuple[str, Iterator[dict], Callable[[], dict]]:
    """(family, difference rows, summary) for two copies of one store. Copies of different families are a
    usage error."""
    opts = opts or DiffOptions()
    fa, fb = detect(a, fmt), detect(b, fmt)
    if fa != fb:
        raise UsageError(f"{a} is a {display_name(fa)} store and {b} a {display_name(fb)} one: "
                         "diff compares two copies of one store")
    tally = Tally(opts.limit)
    rows = family_module(fa, "diff").diff(a, b, tally, opts)
    return fa, rows, lambda: tally.summary(fa, a, b)
