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


def cleanup() -> None:
    shutil.rmtree(SCRATCH, ignore_errors=True)


atexit.register(cleanup)
