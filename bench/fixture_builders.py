"""The fixture builders (``fixtures/build_<family>.py``: the one encoder per format, written with the construct
schemas) for bench/'s input builders and tests/builders.py, each loaded once by file under a name of its own
(``fixtures_build_<family>``: bench/ has a build_rocketmq and a build_kafka of its own)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def load(name: str):
    """fixtures/``name``.py as a module (loaded on first use, then the same module object)."""
    key = f"fixtures_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, FIXTURES / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[key]
            raise
    return sys.modules[key]
