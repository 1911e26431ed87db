"""The shape of the house (docs/architecture.md): no import cycles between mqtool's modules, family packages
never import the renderer, and the CLI's start-up imports nothing heavy.

The import graph is read from the source with ``ast`` (every ``import`` statement, at module level or inside
a function; imports under ``if TYPE_CHECKING:`` never run and are left out), so a lazy import that closes a
cycle is caught as surely as a top-level one."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "mqtool"


def _modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                skip.update(id(n) for n in ast.walk(sub))
    return skip


def imports_of(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The mqtool modules ``name`` imports (the longest known module each import names). Importing a submodule
    initialises its parent packages first; that is not an edge (a package may import its own submodules)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    named: list[str] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            named += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[:len(package) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names]
            named += [s for s in subs if s in mods] or [base]
            if any(f"{base}.{a.name}" not in mods for a in node.names):
                named.append(base)
    out = set()
    for n in named:
        while n and n not in mods:
            n = n.rpartition(".")[0]
        if n and n != name and not name.startswith(n + "."):
            out.add(n)
    return out


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: imports_of(m, p, mods) for m, p in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_cycles():
    """The detector itself: a lazy two-module cycle and a three-module ring are found, a chain is not."""
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_function_level_imports_are_edges(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from mqtool.render import dumps\n"
                   "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mqtool.cli import main\n")
    mods = _modules()
    assert imports_of("mqtool.fake", src, mods) == {"mqtool.render"}


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles (move the shared piece down to a module both can import): " + \
        "; ".join(" <-> ".join(c) for c in found)


FAMILY_DIRS = [d.name for d in PKG.iterdir() if d.is_dir() and (d / "store.py").exists()]


def test_family_packages_never_import_the_renderer():
    """Engines return data; only cli.py and the render* modules format (columns, value spelling and NDJSON
    encoding are in mqtool.columns / mqtool.ndjson, progress goes through mqtool.progress)."""
    assert set(FAMILY_DIRS) >= {"rocketmq", "litemq", "kafka"}
    graph = import_graph()
    bad = []
    for fam in FAMILY_DIRS:
        for m, deps in graph.items():
            if m.startswith(f"mqtool.{fam}.") or m == f"mqtool.{fam}":
                bad += [f"{m} -> {d}" for d in deps if d.startswith("mqtool.render")]
                tree = ast.parse(_modules()[m].read_text(encoding="utf-8"))
                for node in ast.walk(tree):
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                        [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                    bad += [f"{m} -> {n}" for n in names if n == "rich" or n.startswith("rich.")]
    assert not bad, bad


def test_family_list_is_the_registry():
    from mqtool.families import FAMILIES
    assert set(FAMILIES) == set(FAMILY_DIRS)


def _imported_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    return set(out.stdout.split())


HEAVY = ("pyarrow", "pyspark", "rich.progress", "zstandard", "lz4", "snappy", "cramjam", "pandas")


def test_cli_start_up_imports_nothing_heavy():
    """``import mqtool.cli`` (every command's start) leaves the heavy libraries for the commands that use them."""
    loaded = _imported_after("import mqtool.cli")
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY or m in HEAVY)
    assert not heavy, heavy


# What a small `verify store` may import (issue #20: start-up within 3x of `python -c pass`). Beyond what the
# interpreter itself loads at start: the top-level modules below and no others (no dataclasses/inspect, typing of
# our own, orjson for a few lines, hashlib/OpenSSL, click, rich, construct, threading...). The fixture has zstd
# and lz4 bodies, so those codecs are in (verify inflates them; zstandard brings platform and typing).
SMALL_VERIFY_MAY_ADD = frozenset({
    "_bisect", "_compression", "_heapq", "_json", "_sha256", "_sha2", "_struct", "_typing", "array", "base64",
    "binascii", "bisect", "heapq", "isal", "json", "lz4", "mmap", "platform", "runpy", "struct", "typing", "zlib",
    "zstandard",
    "weakref", "_weakrefset", "atexit",     # the SIGBUS guard's finalizer once a file is mapped (mqtool.io)
    "gc"})                                  # (built in: mqtool.__main__ freezes the heap as the process exits)
# our modules that a small verify leaves alone (the CLI, tables, the code catalogue, schemas)
NOT_AT_SMALL_VERIFY = ("mqtool.cli", "mqtool.tables", "mqtool.codes", "mqtool.hints", "mqtool.schema_struct",
                       "mqtool.rocketmq.query", "mqtool.rocketmq.rebuild")


def test_small_verify_imports_only_what_it_needs():
    """`mqtool verify store fixtures/rocketmq/store` (NDJSON on a pipe) as a user runs it: the modules it ends up
    with beyond the interpreter's own start-up are :data:`SMALL_VERIFY_MAY_ADD` (top-level names) and ours, our
    CLI/table/catalogue modules stay out, and the formats modules serve cached constants (their schemas were
    never built)."""
    code = ("import runpy, sys\n"
            "sys.argv = ['mqtool', 'verify', 'store', 'fixtures/rocketmq/store']\n"
            "try:\n"
            "    runpy.run_module('mqtool', run_name='__main__')\n"
            "except SystemExit as e:\n"
            "    assert e.code == 0, e.code\n"
            "from mqtool import schemacache\n"
            "import formats.rocketmq as F\n"
            "print('LOADED' if schemacache.is_loaded(F) else 'CACHED', file=sys.stderr)\n"
            "print('\\n'.join(sys.modules), file=sys.stderr)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MQTOOL_CHECK_CODES", None)           # the tests' code check loads the catalogue; a user's run does not
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    assert '"kind":"summary"' in r.stdout          # on a pipe, as a user's script reads it
    out = r.stderr.split()
    assert out[0] == "CACHED"
    loaded = set(out[1:])
    assert "mqtool.rocketmq.verify" in loaded
    bare = subprocess.run([sys.executable, "-c", "import sys; print('\\n'.join(sys.modules))"], capture_output=True,
                          text=True, check=True, cwd=ROOT, env=env).stdout.split()
    added = {m.split(".")[0] for m in loaded} - {m.split(".")[0] for m in bare} - {"mqtool", "formats"}
    assert not added - SMALL_VERIFY_MAY_ADD, sorted(added - SMALL_VERIFY_MAY_ADD)
    bad = sorted(m for m in loaded if m in NOT_AT_SMALL_VERIFY)
    assert not bad, bad


# ``concurrent.futures`` imports ``logging`` (and ``threading``) when imported: only a run that starts workers
# may load it, never one whose input is one small file of each family.
WORKER_MACHINERY = ("concurrent", "logging")
SMALL_RUNS = [("verify", "store", "fixtures/rocketmq/store"), ("verify", "store", "fixtures/litemq/store"),
              ("verify", "store", "fixtures/kafka/logdir", "--deep"), ("dump", "commitlog", "fixtures/rocketmq/store"),
              ("dump", "commitlog", "fixtures/litemq/store"), ("dump", "kafka", "fixtures/kafka/logdir", "--deep"),
              ("dump", "kafka", "fixtures/kafka/logdir", "--deep", "--print-data"),
              ("query", "fixtures/rocketmq/store", "--key", "order-1")]


def test_small_runs_load_no_worker_machinery():
    """`dump kafka --deep` of a small file started its decoding lanes (a ThreadPoolExecutor: concurrent.futures,
    logging) for at most one group of batches; small verify/dump/query runs of every family load neither."""
    code = ("import runpy, sys, io, contextlib\n"
            "sys.argv = ['mqtool'] + sys.argv[1:]\n"
            "try:\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        runpy.run_module('mqtool', run_name='__main__')\n"
            "except SystemExit as e:\n"
            "    assert e.code in (0, 1), e.code\n"
            "print('\\n'.join(sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in SMALL_RUNS:
        r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env)
        assert r.returncode == 0, (args, r.stderr[-2000:])
        loaded = sorted(m for m in r.stdout.split() if m.split(".")[0] in WORKER_MACHINERY)
        assert not loaded, (args, loaded)


def test_schema_cache_is_current():
    """mqtool/_schemacache_data.py is what tools/gen_schema_cache.py derives from formats/ now."""
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_schema_cache.py"), "--check"],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr


def test_schema_cache_serves_the_real_values_and_steps_aside_when_stale():
    """In a fresh process: the cached constants equal the real module's; the first schema access builds the
    real module in place; a cache whose recorded digest no longer matches its source is not used at all."""
    code = ("import mqtool, sys\n"
            "from mqtool import schemacache, _schemacache_data as D\n"
            "import formats.rocketmq as F\n"
            "assert not schemacache.is_loaded(F)\n"
            "cached = {k: getattr(F, k) for k in D.CONSTANTS['formats.rocketmq']}\n"
            "size = F.index_file_size(5, 7)\n"
            "assert not schemacache.is_loaded(F)\n"
            "assert F.MessageV1.sizeof  # a schema: the real module runs\n"
            "assert schemacache.is_loaded(F) and 'construct' in sys.modules\n"
            "assert all(getattr(F, k) == v for k, v in cached.items())\n"
            "assert size == F.index_file_size(5, 7)\n"
            "from mqtool.rocketmq import layout\n"
            "assert layout.current().facts() == layout.LAYOUT.facts()\n"
            "print('ok')")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.stdout.strip() == "ok", r.stderr
    stale = ("import mqtool._schemacache_data as D\n"
             "D.SOURCES = dict(D.SOURCES, **{'formats/rocketmq.py': '0' * 64})\n"
             "from mqtool import schemacache\n"
             "import formats.rocketmq as F, sys\n"
             "assert not schemacache.valid() and schemacache.is_loaded(F) and 'construct' in sys.modules\n"
             "print('ok')")
    r = subprocess.run([sys.executable, "-c", stale], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.stdout.strip() == "ok", r.stderr


def test_schema_cache_is_used_when_the_project_is_reached_by_a_finder_only(tmp_path):
    """An editable install (the README's ``pip install -e``) maps ``mqtool`` and ``formats`` with a finder of its
    own and puts nothing of the project on ``sys.path``; run from another directory, the cache must still find
    its sources, or every command silently pays for construct (~20 ms; the cache looked only on sys.path)."""
    code = ("import importlib.util, os, sys\n"
            f"ROOT = {str(ROOT)!r}\n"
            "class Mapped:\n"
            "    @staticmethod\n"
            "    def find_spec(name, path=None, target=None):\n"
            "        if name not in ('mqtool', 'formats'):\n"
            "            return None\n"
            "        d = os.path.join(ROOT, name)\n"
            "        return importlib.util.spec_from_file_location(name, os.path.join(d, '__init__.py'),\n"
            "                                                      submodule_search_locations=[d])\n"
            "sys.meta_path.insert(0, Mapped)\n"
            "assert all(os.path.abspath(p or '.') != ROOT for p in sys.path), sys.path\n"
            "import mqtool.rocketmq.store\n"
            "from mqtool import schemacache\n"
            "assert os.path.dirname(mqtool.__file__) == os.path.join(ROOT, 'mqtool'), mqtool.__file__\n"
            "assert schemacache.valid(), 'the cache was not used'\n"
            "assert 'construct' not in sys.modules\n"
            "print('ok')")
    r = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.stdout.strip() == "ok", r.stderr


def test_decode_failures_are_inside_the_error_tree():
    """One error tree: codec failures of every family and record decode failures are MqToolErrors (a caller
    that catches MqToolError sees them), and a construct parse error is wrapped as a one-line DecodeError."""
    import construct

    from mqtool import codecs
    from mqtool.errors import CorruptRecordError, DecodeError, MqToolError, wrap_decode
    from mqtool.litemq.records import DecodeError as LiteDecodeError
    from mqtool.rocketmq.records import DecodeFailure

    for cls in (codecs.CodecError, LiteDecodeError, DecodeFailure, CorruptRecordError):
        assert issubclass(cls, DecodeError) and issubclass(cls, MqToolError), cls
    assert issubclass(codecs.CodecError, ValueError)          # callers that caught ValueError still do
    try:
        construct.Int32ub.parse(b"\x00")
    except construct.ConstructError as e:
        w = wrap_decode(e, "f.log", 7)
    assert isinstance(w, DecodeError) and str(w).startswith("f.log@7: cannot decode: ") and "\n" not in str(w)


def test_every_family_package_has_a_module_for_every_role():
    """families.ROLES names the modules each family package has (docs/architecture.md); verify and rebuild are
    packages split by check / step."""
    from mqtool.families import REGISTRY, ROLES

    for fam in REGISTRY.values():
        base = PKG / fam.name
        for role in ROLES:
            assert (base / f"{role}.py").is_file() or (base / role / "__init__.py").is_file(), (fam.name, role)
        for role in ("verify", "rebuild"):
            assert (base / role / "__init__.py").is_file() and not (base / f"{role}.py").exists(), (fam.name, role)


def test_no_test_module_imports_another():
    """Shared test code lives in conftest.py, builders.py and the other helper modules of tests/ (pagecheck,
    fuzzcase, ...), never in a test module: a test file can then be run, moved or deleted on its own."""
    tests = Path(__file__).resolve().parent
    offenders = []
    for p in sorted(tests.glob("test_*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            offenders += [f"{p.name}: {n}" for n in names if n.split(".")[-1].startswith("test_")]
    assert offenders == []
