"""Start-up without construct: the plain constants of ``formats/*.py`` and the layouts derived from their
schemas, served from a generated cache until a schema object itself is needed.

Importing construct and building every schema costs more than the whole of a small ``verify`` (~20 ms of
~60). Most commands on most inputs need only numbers the schemas give: magic codes, sizes, the struct formats
and field offsets derived from the schemas (:mod:`mqtool.schema_struct`, :mod:`mqtool.rocketmq.layout`). So:

* :func:`install` (run by ``import mqtool``) puts a finder before the normal one for the ``formats`` modules.
  A ``formats.<name>`` module it creates starts with the plain constants (ints, strings, bytes and containers
  of them) the cache holds for it; the first access to anything else (a schema, a function) executes the real
  module into the same module object, after which it is the real module in every respect.
* :func:`derive` answers a derivation (a struct format, a field table, a layout's facts) from the cache by its
  key, else computes it (which loads the schema).

The cache is ``mqtool/_schemacache_data.py``, written by ``python tools/gen_schema_cache.py`` from the real
modules (``tests/test_common_architecture.py`` fails when it is not current). It is used only while the
SHA-256 of every source it was derived from (the ``formats`` files, the deriving code) is what it records:
an edited schema is never answered from a stale cache, whatever the tests say. ``MQTOOL_SCHEMA_CACHE=0``
turns the cache off.
"""
from __future__ import annotations

import importlib.machinery
import os
import sys

_state: dict = {"valid": None, "recording": None}


def _data():
    from mqtool import _schemacache_data

    return _schemacache_data


def source_path(rel: str) -> str:
    """The file ``rel`` (``formats/x.py`` or ``mqtool/...``) of this installation."""
    top, _, rest = rel.partition("/")
    if top == "mqtool":
        base = os.path.dirname(os.path.abspath(__file__))
    else:
        base = _package_dir(top)
        if base is None:
            raise FileNotFoundError(rel)
    return os.path.join(base, *rest.split("/"))


def _package_dir(top: str) -> str | None:
    """Where the package ``top`` is imported from: its ``__path__`` once imported, else what the import system
    would find. Every finder on ``sys.meta_path`` is asked, not only the ``sys.path`` one: an editable install
    (``pip install -e``, the README's) maps the packages with a finder of its own, and nothing of the project
    is on ``sys.path`` when ``mqtool`` runs from another directory."""
    module = sys.modules.get(top)
    locations = getattr(module, "__path__", None)
    if not locations:
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(top, None) if find is not None else None
            if spec is not None:
                locations = spec.submodule_search_locations
                break
    return next(iter(locations), None) if locations else None


def source_digest(rel: str) -> str:
    from mqtool.io import read_input

    return sha256(read_input(source_path(rel))).hexdigest()


def sha256(data: bytes = b""):
    """``hashlib.sha256(data)`` from the interpreter's own module when it has one: hashlib loads OpenSSL,
    which costs more at start-up than hashing the few small inputs here (issue #20); the digest is the same."""
    try:
        from _sha256 import sha256 as new          # CPython <= 3.11
    except ImportError:
        try:
            from _sha2 import sha256 as new        # CPython 3.12+
        except ImportError:
            from hashlib import sha256 as new
    return new(data)


def valid() -> bool:
    """The cache is on and every source it was derived from is unchanged (checked once per process)."""
    if _state["valid"] is None:
        ok = os.environ.get("MQTOOL_SCHEMA_CACHE", "1") != "0" and _state["recording"] is None
        if ok:
            try:
                ok = all(source_digest(rel) == digest for rel, digest in _data().SOURCES.items())
            except (OSError, ImportError, ValueError, AttributeError):
                ok = False
        _state["valid"] = ok
    return _state["valid"]


def derive(key: tuple, compute):
    """The value of the derivation ``key`` (a tuple of plain values naming it): from the cache when it holds it
    and is valid, else ``compute()`` (a plain value: strings, numbers, tuples, dicts)."""
    rec = _state["recording"]
    if rec is not None:
        value = compute()
        rec[key] = value
        return value
    if valid():
        found = _data().DERIVED.get(key, _MISSING)
        if found is not _MISSING:
            return found
    return compute()


_MISSING = object()


def record(into: dict) -> None:
    """Generator use: compute every derivation from the schemas and note it in ``into`` (no cache read)."""
    _state["recording"] = into
    _state["valid"] = False


def is_loaded(module) -> bool:
    """Whether the real code of a ``formats`` module has run (its schemas exist): False while it serves only
    the cached constants."""
    spec = getattr(module, "__spec__", None)
    return type(getattr(spec, "loader", None)) is not _LazyLoader or "__getattr__" not in module.__dict__


# ---- the derivations of mqtool.schema_struct, by schema name --------------------------------------------------

def prefix_format(module, name: str, stop_before: str | None = None):
    """``schema_struct.fixed_prefix_format(module.<name>)``: (struct.Struct, [field names])."""
    import struct

    def compute():
        from mqtool.schema_struct import fixed_prefix_format

        st, names = fixed_prefix_format(getattr(module, name), stop_before=stop_before)
        return st.format, tuple(names)

    fmt, names = derive((module.__name__, "fixed_prefix_format", name, stop_before), compute)
    return struct.Struct(fmt), list(names)


def exact(module, name: str) -> str:
    """``schema_struct.exact_format(module.<name>)``: the struct format of a schema of fixed integers."""
    def compute():
        from mqtool.schema_struct import exact_format

        return exact_format(getattr(module, name))

    return derive((module.__name__, "exact_format", name), compute)


def notation(module, name: str) -> str:
    """``schema_struct.layout_notation(module.<name>)``: the field sequence a compiled walker checks."""
    def compute():
        from mqtool.schema_struct import layout_notation

        return layout_notation(getattr(module, name))

    return derive((module.__name__, "layout_notation", name), compute)


def offsets(module, name: str) -> dict[str, int]:
    """``schema_struct.field_offsets(module.<name>)``: {field name: byte offset}."""
    def compute():
        from mqtool.schema_struct import field_offsets

        return field_offsets(getattr(module, name))

    return dict(derive((module.__name__, "field_offsets", name), compute))


class _LazyLoader:
    def __init__(self, real: importlib.machinery.ModuleSpec, constants: dict):
        self.real = real
        self.constants = constants

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        module.__dict__.update(self.constants)
        real = self.real
        for name, (line, src) in _data().FUNCTIONS.get(module.__name__, {}).items():
            # at its own line of the real file, so a traceback points there (exec of the text, not compile():
            # the first compile() call builds Python's AST types, ~9 M instructions of start-up)
            exec("\n" * (line - 1) + src, module.__dict__)
            fn = module.__dict__.get(name)
            if real.origin and hasattr(fn, "__code__"):
                fn.__code__ = _located(fn.__code__, real.origin)

        def __getattr__(name: str):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            _load(module, real)
            try:
                return module.__dict__[name]
            except KeyError:
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from None

        module.__getattr__ = __getattr__


def _located(code, filename: str):
    """``code`` (and the code objects inside it) as compiled from ``filename``."""
    consts = tuple(_located(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _load(module, real) -> None:
    """Run the real code of ``module`` into it (once)."""
    if module.__dict__.pop("__getattr__", None) is None:
        return
    real.loader.exec_module(module)


class _Finder:
    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("formats.") or not valid():
            return None
        constants = _data().CONSTANTS.get(fullname)
        if constants is None:
            return None
        real = importlib.machinery.PathFinder.find_spec(fullname, path)
        if real is None or real.loader is None:
            return None
        spec = importlib.machinery.ModuleSpec(fullname, _LazyLoader(real, constants), origin=real.origin)
        spec.has_location = real.has_location
        spec.cached = real.cached
        return spec


_FINDER = _Finder()


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
