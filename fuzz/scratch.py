"""The fuzz targets' private scratch directory: targets that need a file write the input here (never near real
data); removed at exit."""
from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

SCRATCH = Path(tempfile.mkdtemp(prefix="mqtool-fuzz-"))


def scratch(name: str, data: bytes) -> Path:
    """``data`` written to ``SCRATCH/name`` (directories made); its path."""
    p = SCRATCH / name
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "wb") as f:         # a scratch file of our own, not an input
        f.write(data)
    return p


def read_seeds(base: Path, glob: str, limit: int, cut: int | None = None) -> list[bytes]:
    """The first ``cut`` bytes (all when None) of the first ``limit`` files under ``base`` matching ``glob``, in
    name order: real bytes for the targets to mutate (read-only seed material)."""
    got = []
    for p in sorted(x for x in base.glob(glob) if x.is_file())[:limit]:
        with open(p, "rb") as f:
            got.append(f.read() if cut is None else f.read(cut))
    return got


def cleanup() -> None:
    shutil.rmtree(SCRATCH, ignore_errors=True)


atexit.register(cleanup)
