"""Tables that fit the terminal.

Which columns a table shows is decided from a sample of its rows and the width available: every column's
natural width is measured, and the least important ones (highest ``Column.priority``, rightmost first) are left
out until the rest fits. Essential columns (priority 0: offsets, message ids, topics) are never left out and
never truncated; when even they do not fit, or only one record is shown, records are shown as ``field: value``
blocks instead (psql's expanded view). This module only decides; :mod:`mqtool.render` draws.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # pragma: no cover
    from mqtool.columns import Column

# Per column: one space of padding on each side and one rule; plus the table's closing rule.
CELL_OVERHEAD = 3
MIN_WRAPPED = 8       # a wrapping column narrower than this reads as one letter per line


def content_widths(columns: list["Column"], rows: Iterable[dict]) -> list[int]:
    """The widest cell of each column over ``rows`` (0: the column is empty there)."""
    from mqtool.sanitize import visible

    widths = [0] * len(columns)
    for r in rows:
        for i, c in enumerate(columns):
            n = len(visible(c.cell(r)))          # as shown: escapes for controls, one line
            if n > widths[i]:
                widths[i] = n
    return widths


def natural_widths(columns: list["Column"], rows: Iterable[dict], content: list[int] | None = None) -> list[int]:
    content = content_widths(columns, rows) if content is None else content
    widths = [max(len(c.header), w) for c, w in zip(columns, content)]
    return [min(w, c.max_width) if c.max_width and c.priority > 0 else w for w, c in zip(widths, columns)]


def least_width(column: "Column", natural: int) -> int:
    if column.priority == 0 or column.no_wrap:
        return natural
    return min(natural, max(len(column.header), MIN_WRAPPED))


def table_width(widths: Iterable[int]) -> int:
    widths = list(widths)
    return sum(widths) + CELL_OVERHEAD * len(widths) + 1


def fit(columns: list["Column"], sample: list[dict], width: int) -> tuple[list["Column"], list[int]] | None:
    """(columns to show, their widths) for a table of at most ``width`` characters; None when the essential
    columns alone do not fit (show records vertically). Columns empty in the whole sample are left out."""
    content = content_widths(columns, sample)
    natural = natural_widths(columns, sample, content)
    keep = [i for i, c in enumerate(columns) if content[i] or c.priority == 0]      # empty columns: left out
    least = [least_width(c, w) for c, w in zip(columns, natural)]
    order = sorted((i for i in keep if columns[i].priority > 0), key=lambda i: (-columns[i].priority, -i))
    while table_width(least[i] for i in keep) > width and order:
        keep.remove(order.pop(0))
    if table_width(least[i] for i in keep) > width:
        return None
    return [columns[i] for i in keep], [natural[i] for i in keep]


def select(columns: list["Column"], fields: list[str], column_type) -> list["Column"]:
    """The columns named by ``--fields`` (by key or header, any case), in the order given; a name that is no
    column of this table becomes a plain column of that key."""
    by_name = {}
    for c in columns:
        by_name.setdefault(c.key.lower(), c)
        by_name.setdefault(c.header.lower(), c)
    return [by_name.get(f.lower()) or column_type(f, f) for f in fields]
