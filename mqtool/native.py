"""Where the optional compiled helpers are found, and the one switch that turns them off.

Each helper in ``mqtool/_native/`` replaces one hot pure-Python loop and must give exactly what that loop
gives (a test per helper runs both on the same bytes). ``load(name)`` returns the module, or None when it was
not built (no compiler at install time) or when the switch is off — then callers use their Python path, which
always works. Callers ask ``load()`` when they start a piece of work (never keep a module from import time), so
the switch decides for every family at once:

* ``MQTOOL_NATIVE`` in the environment: ``auto`` (the default; ``1``/``on`` mean the same) uses every helper
  that is built, ``0``/``off`` none. Worker processes (``--jobs``, Spark executors) inherit it.
* :func:`switched` for a test or a tool comparing both paths in one process: ``with native.switched(False):``
  (or pytest's ``monkeypatch.setenv("MQTOOL_NATIVE", "0")``, which reaches worker processes too).

The RocketMQ helpers are the parts of one module, ``rmqcore`` (:data:`PARTS`); all compiled code shares the
primitives of ``mqtool/_native/mqcore.h``. Field offsets and sizes a helper needs come from the construct
schemas (``mqtool.rocketmq.layout``, ``mqtool.schema_struct``), never from constants written in C, and a
helper whose layout no longer matches the schema stays off (``layout.native_ok``, kafka's ``RECORD_LAYOUT``).
"""
from __future__ import annotations

import contextlib
import importlib
import os

# Every helper setup.py builds (keep the two lists in step; tests/test_common_native.py checks they load under CI).
HELPERS = ("probe", "rmqcore", "kafka")
# The parts of a helper module that callers load by their own name: the RocketMQ core's verify lane,
# rebuild-index dispatch loop, dump rows and Message decoder (mqtool/_native/rmqcore.h).
PARTS = {"rmqverify": ("rmqcore", "verify"), "rmqrebuild": ("rmqcore", "rebuild"),
         "rmqdump": ("rmqcore", "dump"), "rmqdecode": ("rmqcore", "decode")}
GUARD = "guard"        # also built by setup.py; loaded by guard(), not load(): MQTOOL_NATIVE=0 leaves it on
_OFF = {"0", "off", "no", "false"}
_cache: dict[str, object] = {}
_forced: list[bool] = []          # switched()'s stack: the innermost one decides


def enabled() -> bool:
    """Whether the compiled helpers may be used now: :func:`switched`, else ``MQTOOL_NATIVE`` (default auto)."""
    if _forced:
        return _forced[-1]
    return os.environ.get("MQTOOL_NATIVE", "auto").strip().lower() not in _OFF


@contextlib.contextmanager
def switched(on: bool):
    """Within the block, every family's compiled helpers are on (when built) or off, whatever ``MQTOOL_NATIVE``
    says (this process only: worker processes follow the environment)."""
    _forced.append(bool(on))
    try:
        yield
    finally:
        _forced.pop()


def load(name: str):
    """The compiled helper ``mqtool._native.<name>`` (or the part :data:`PARTS` names), or None (not built,
    or switched off)."""
    if not enabled():
        return None
    if name in PARTS:
        module, part = PARTS[name]
        mod = load(module)
        return getattr(mod, part, None) if mod is not None else None
    if name not in _cache:
        try:
            _cache[name] = importlib.import_module(f"mqtool._native.{name}")
        except ImportError:
            _cache[name] = None
    return _cache[name]


def byte_find():
    """``find(buf, sub, start, end) -> int``: what ``buf.find(sub, start, end)`` answers for ``start, end >= 0``,
    by the compiled memchr search (``probe.find``) when built and switched on, else by ``buf.find`` itself.
    Ask once per scan (the switch is read here)."""
    fn = getattr(load("probe"), "find", None)
    return fn if fn is not None else _py_find


def _py_find(buf, sub, start: int, end: int) -> int:
    return buf.find(sub, start, end)


def guard():
    """The SIGBUS guard (``mqtool._native.guard``) or None (not built, or ``MQTOOL_SIGBUS_GUARD=0``, which
    the benchmark uses to measure it). A safety net rather than a decoder: ``MQTOOL_NATIVE=0`` leaves it on,
    so the pure-Python readers are guarded too."""
    if os.environ.get("MQTOOL_SIGBUS_GUARD", "1").strip().lower() in _OFF:
        return None
    key = "(guard)"         # cached apart from load()'s entries
    if key not in _cache:
        try:
            _cache[key] = importlib.import_module(f"mqtool._native.{GUARD}")
        except ImportError:
            _cache[key] = None
    return _cache[key]


def status() -> dict[str, bool]:
    """Which helpers are in use now (for ``mqtool --version`` and the benchmark)."""
    return {n: load(n) is not None for n in HELPERS}


def summary() -> str:
    """One line for people: the helpers in use and the CRC-32 implementation (``mqtool --version``, bench)."""
    from mqtool import fastcrc

    used = ", ".join(n for n, ok in status().items() if ok and n != "probe")
    if not used:
        used = "none (pure Python)" + ("" if enabled() else ", MQTOOL_NATIVE=0")
    return (f"compiled helpers: {used}; CRC-32: {fastcrc.IMPLEMENTATION}; "
            f"SIGBUS guard: {'on' if guard() is not None else 'off'}")
