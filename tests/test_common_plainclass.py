"""mqtool.plainclass: every class it makes behaves as the standard ``dataclasses.dataclass`` makes it.

The reference is independent of plainclass: each module that uses it is executed a second time from its source
with ``from dataclasses import`` in place of ``from mqtool.plainclass import``, and the two classes of each
name are compared (parameters, fields, repr, equality, hashing, frozen, slots, replace, pickling).
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import pickle
import pkgutil
import types
from pathlib import Path

import pytest

import mqtool
from mqtool import plainclass

ROOT = Path(mqtool.__file__).parent
IMPORT = "from mqtool.plainclass import"


def _users() -> list[str]:
    names = []
    for m in pkgutil.walk_packages([str(ROOT)], "mqtool."):
        path = ROOT.joinpath(*m.name.split(".")[1:])
        src = path / "__init__.py" if m.ispkg else path.with_suffix(".py")
        if src.is_file() and IMPORT + " dataclass" in src.read_text(encoding="utf-8"):
            names.append(m.name)
    return names


USERS = _users()


def _twin(name: str) -> types.ModuleType:
    """The module ``name`` executed again from its source, with the standard dataclasses."""
    real = importlib.import_module(name)
    src = Path(real.__file__).read_text(encoding="utf-8")
    src = src.replace(IMPORT + " dataclass, field, replace", "from dataclasses import dataclass, field, replace")
    src = src.replace(IMPORT, "from dataclasses import")
    twin = types.ModuleType(name)                 # same __module__, so reprs and qualnames compare
    twin.__file__ = real.__file__
    exec(compile(src, real.__file__, "exec"), twin.__dict__)
    return twin


def _plain_classes(mod) -> list[type]:
    return [v for v in vars(mod).values()
            if isinstance(v, type) and v.__module__ == mod.__name__ and "__plain_fields__" in v.__dict__]


def test_the_verify_path_modules_use_it():
    # the modules a small verify loads (tests/test_common_architecture.py checks dataclasses stays out)
    for name in ("mqtool.findings", "mqtool.options", "mqtool.families", "mqtool.rocketmq.store",
                 "mqtool.rocketmq.scan", "mqtool.rocketmq.indexfiles"):
        assert name in USERS


@pytest.mark.parametrize("name", USERS)
def test_classes_match_the_standard_dataclass(name):
    real = importlib.import_module(name)
    twin = _twin(name)
    classes = _plain_classes(real)
    assert classes, f"{name} imports plainclass but defines no class with it"
    for cls in classes:
        ref = getattr(twin, cls.__name__)
        assert dataclasses.is_dataclass(ref) and dataclasses.is_dataclass(cls)
        _compare(cls, ref)


def _fields(c) -> list[tuple]:
    def same(v):        # a factory defined in the module (a lambda) is another object in the twin
        return v.__qualname__ if isinstance(v, types.FunctionType) else v

    return [(f.name, same(f.default), same(f.default_factory)) for f in dataclasses.fields(c)]


def _compare(cls, ref):
    assert _fields(cls) == _fields(ref)
    assert cls.__match_args__ == ref.__match_args__
    assert getattr(cls, "__slots__", None) == getattr(ref, "__slots__", None)
    assert (cls.__hash__ is None) == (ref.__hash__ is None)
    frozen = ref.__dataclass_params__.frozen
    args = [f"v{i}" for i, f in enumerate(dataclasses.fields(ref))
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    try:
        want = ref(*args)
    except Exception as e:           # a __post_init__ that checks its values: the same refusal
        with pytest.raises(type(e)):
            cls(*args)
        return
    got = cls(*args)
    params = [(p.name, p.kind, p.default is inspect.Parameter.empty)
              for p in inspect.signature(type(got).__init__).parameters.values()]
    assert params == [(p.name, p.kind, p.default is inspect.Parameter.empty)
                      for p in inspect.signature(ref.__init__).parameters.values()]
    assert repr(got) == repr(want)
    assert got == cls(*args) and not (got != cls(*args))
    assert got != want                          # another class: never equal (as between two dataclasses)
    if ref.__hash__ is not None:
        assert hash(got) == hash(want)
    first = dataclasses.fields(ref)[0].name
    changed = dataclasses.replace(got, **{first: "other"})
    assert getattr(changed, first) == "other" and type(changed) is cls
    assert plainclass.replace(got, **{first: "other"}) == changed
    if frozen:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(got, first, 1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(want, first, 1)
    if "<locals>" not in cls.__qualname__:
        assert pickle.loads(pickle.dumps(got)) == got


def test_defaults_factories_and_inheritance():
    @plainclass.dataclass
    class Base:
        a: int
        b: list = plainclass.field(default_factory=list)
        c: int = 3

    @plainclass.dataclass
    class Sub(Base):
        d: str = "x"
        c: int = 4

    s = Sub(1)
    assert (s.a, s.b, s.c, s.d) == (1, [], 4, "x")
    assert s.b is not Sub(1).b
    assert repr(s) == "test_defaults_factories_and_inheritance.<locals>.Sub(a=1, b=[], c=4, d='x')"
    assert [f.name for f in dataclasses.fields(Sub)] == ["a", "b", "c", "d"]
    with pytest.raises(TypeError):
        Sub()


def test_frozen_init_sets_fields_as_object_setattr_does():
    """A frozen class's __init__ stores straight into the instance dict (faster) only where that is what
    object.__setattr__ does: a subclass's property of a field's name, or a slotted base, still gets its
    setter / slot, as with the standard dataclass (reference: dataclasses.dataclass, same classes)."""
    for make in (plainclass.dataclass, dataclasses.dataclass):
        @make(frozen=True)
        class P:
            a: int
            b: list = plainclass.field(default_factory=list) if make is plainclass.dataclass else \
                dataclasses.field(default_factory=list)

        class Q(P):
            got = []

            @property
            def a(self):
                return self.__dict__.get("_a")

            @a.setter
            def a(self, v):
                Q.got.append(v)
                self.__dict__["_a"] = v * 10

        class Slotted:
            __slots__ = ("a",)

        @make(frozen=True)
        class R(Slotted):
            a: int

        p, q, r = P(1), Q(2), R(3)
        assert (p.a, p.b, p.__dict__) == (1, [], {"a": 1, "b": []})
        assert (q.a, Q.got, "a" in q.__dict__) == (20, [2], False)
        assert r.a == 3 and "a" not in r.__dict__
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.a = 5


def test_refuses_what_it_does_not_do():
    with pytest.raises(TypeError):
        @plainclass.dataclass
        class Bad:
            a: int = 0
            b: int
    with pytest.raises(ValueError):
        @plainclass.dataclass
        class Mutable:
            a: list = []
    with pytest.raises(TypeError):
        @plainclass.dataclass(frozen=True, slots=True)
        class Both:
            a: int
