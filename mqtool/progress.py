"""Progress reporting for engines that walk many bytes, without knowing how (or whether) it is drawn.

An engine writes ``with progress(total, "verify commitlog", enabled=opts.progress) as bar: bar.advance(n)``.
The drawing is installed by the front end (:mod:`mqtool.render` installs its terminal bar when it is
imported); with none installed, or when the front end declines, the bar is a no-op.
"""
from __future__ import annotations

from collections.abc import Callable

_drawer: list[Callable | None] = [None]


class NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def advance(self, n: int) -> None:
        pass

    def update_to(self, n: int) -> None:
        pass


def set_drawer(draw: Callable | None) -> None:
    """``draw(total_bytes, description, enabled)`` returns an object like :class:`NoProgress`."""
    _drawer[0] = draw


def progress(total_bytes: int, description: str = "scanning", enabled: bool | None = None):
    draw = _drawer[0]
    if draw is None or enabled is False or total_bytes <= 0:
        return NoProgress()
    return draw(total_bytes, description, enabled)
