"""``dataclass`` for the modules a small ``verify`` loads: the same classes, without loading :mod:`dataclasses`.

The standard decorator imports :mod:`inspect` (with ast, dis, tokenize) and compiles several methods for every
class it decorates: ~40 M instructions plus 2-4 M per class, more than the rest of a small ``verify store``
(issue #20: within 3x of ``python -c pass``). The modules on that path import ``dataclass`` and ``field`` from
here instead, and their classes keep what a dataclass gives: ``__init__`` with the fields as parameters (in
the order and with the defaults and ``default_factory`` a dataclass has, inherited fields first), ``__repr__``,
``__eq__``, ``__hash__`` (frozen: of the fields; not frozen: unhashable), frozen instances, ``slots``,
``__match_args__``, ``__post_init__``. The ``__init__`` is compiled when the first instance is made (a
class only defined costs nothing); ``__dataclass_fields__`` is made by :mod:`dataclasses` when first asked for,
so ``dataclasses.replace``, ``fields``, ``asdict`` and ``is_dataclass`` work on these classes as on any
dataclass. :func:`replace` is ``dataclasses.replace`` without loading it.

Only what the decorated classes here use is supported (``frozen``, ``slots``, ``field(default=...,
default_factory=...)``); anything else is a TypeError when the class is defined, never a silent difference.
``tests/test_common_plainclass.py`` checks every class made here against the standard decorator.
"""
from __future__ import annotations

import reprlib

_MISSING = object()
_FACTORY = object()         # the default of a parameter whose field has a default_factory


class Field:
    __slots__ = ("name", "default", "default_factory")

    def __init__(self, default=_MISSING, default_factory=_MISSING):
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = None
        self.default = default
        self.default_factory = default_factory


def field(*, default=_MISSING, default_factory=_MISSING) -> Field:
    """``dataclasses.field`` with ``default`` or ``default_factory`` (nothing else)."""
    return Field(default, default_factory)


def dataclass(cls=None, /, *, frozen: bool = False, slots: bool = False):
    """``@dataclass``, ``@dataclass(frozen=True)``, ``@dataclass(slots=True)`` (see the module)."""
    if frozen and slots:
        raise TypeError("plainclass: frozen with slots is not supported (use dataclasses)")

    def wrap(c):
        return _process(c, frozen, slots)

    return wrap if cls is None else wrap(cls)


def replace(obj, /, **changes):
    """A copy of ``obj`` with ``changes`` (``dataclasses.replace`` for these classes)."""
    for f in obj.__plain_fields__:
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


def _is_classvar(annotation) -> bool:
    a = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return a.startswith(("ClassVar", "typing.ClassVar")) or a.startswith(("InitVar", "dataclasses.InitVar"))


def _process(cls, frozen: bool, slots: bool):
    fields: dict[str, Field] = {}
    for base in cls.__mro__[-1:0:-1]:
        if "__plain_fields__" in base.__dict__:
            for f in base.__plain_fields__:
                fields[f.name] = f
        elif "__dataclass_fields__" in base.__dict__:
            raise TypeError(f"plainclass: {cls.__name__} cannot inherit from the dataclass {base.__name__}")
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if _is_classvar(annotation):
            if "InitVar" in str(annotation):
                raise TypeError(f"plainclass: InitVar field {name!r} is not supported")
            continue
        value = cls.__dict__.get(name, _MISSING)
        f = value if isinstance(value, Field) else Field(value)
        f.name = name
        if isinstance(f.default, (list, dict, set)):
            raise ValueError(f"mutable default {type(f.default)} for field {name} is not allowed: "
                             "use default_factory")
        if isinstance(value, Field):
            if f.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        fields[name] = f
    order = tuple(fields.values())
    seen_default = False
    for f in order:
        if f.default is not _MISSING or f.default_factory is not _MISSING:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
    if slots:
        if "__slots__" in cls.__dict__:
            raise TypeError(f"{cls.__name__} already specifies __slots__")
        inherited = {n for b in cls.__mro__[1:-1] for n in b.__dict__.get("__slots__", ())}
        ns = {k: v for k, v in cls.__dict__.items() if k not in fields and k not in ("__dict__", "__weakref__")}
        ns["__slots__"] = tuple(n for n in fields if n not in inherited)
        cls = type(cls)(cls.__name__, cls.__bases__, ns)
    cls.__plain_fields__ = order
    cls.__plain_frozen__ = frozen
    cls.__dataclass_fields__ = _DataclassFields()
    names = tuple(f.name for f in order)
    if "__init__" not in cls.__dict__:
        cls.__init__ = _init_stub(cls)
    if "__repr__" not in cls.__dict__:
        cls.__repr__ = _repr
    if "__eq__" not in cls.__dict__:
        cls.__eq__ = _eq
    if "__hash__" not in cls.__dict__ or cls.__dict__["__hash__"] is None:
        cls.__hash__ = _hash if frozen else None
    if frozen:
        for name, fn in _frozen_methods(cls, names):
            if name in cls.__dict__:
                raise TypeError(f"cannot overwrite attribute {name} in class {cls.__name__}")
            setattr(cls, name, fn)
    if "__match_args__" not in cls.__dict__:
        cls.__match_args__ = names
    return cls


def _init_stub(cls):
    def __init__(self, *args, **kwargs):
        _compile_init(cls)(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _compile_init(cls):
    """Compile ``cls.__init__`` (the one a dataclass has) and put it on the class."""
    fields = cls.__plain_fields__
    ns = {"_FACTORY": _FACTORY, "_setattr": object.__setattr__, "_cls": cls}
    params, body, direct = [], [], []
    for i, f in enumerate(fields):
        if f.default_factory is not _MISSING:
            ns[f"_factory{i}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            value = f"_factory{i}() if {f.name} is _FACTORY else {f.name}"
        elif f.default is not _MISSING:
            ns[f"_default{i}"] = f.default
            params.append(f"{f.name}=_default{i}")
            value = f.name
        else:
            params.append(f.name)
            value = f.name
        body.append(f"    _setattr(self, {f.name!r}, {value})" if cls.__plain_frozen__
                    else f"    self.{f.name} = {value}")
        direct.append(f"        _d[{f.name!r}] = {value}")
    if cls.__plain_frozen__ and _dict_stores(cls):
        # object.__setattr__ of an attribute no descriptor of the class takes is a store into the instance's
        # __dict__: done directly, 2-3x faster (a run of millions of findings makes millions of Finding); an
        # instance of a subclass (which may add descriptors) takes the general path
        body = ["    if self.__class__ is _cls:", "        _d = self.__dict__", *direct, "    else:",
                *(" " * 4 + line for line in body)]
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    src = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(src, ns)
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init
    return init


def _dict_stores(cls) -> bool:
    """Whether setting each field of an instance of ``cls`` stores it in the instance's ``__dict__`` (it has
    one, and no class of its MRO has a data descriptor, e.g. a property or a slot, of a field's name)."""
    if not cls.__dictoffset__:
        return False
    for f in cls.__plain_fields__:
        for base in cls.__mro__:
            if f.name in base.__dict__:
                kind = type(base.__dict__[f.name])
                if hasattr(kind, "__set__") or hasattr(kind, "__delete__"):
                    return False
                break
    return True


@reprlib.recursive_repr()
def _repr(self) -> str:
    return (f"{self.__class__.__qualname__}("
            + ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in self.__plain_fields__) + ")")


def _values(self) -> tuple:
    return tuple(getattr(self, f.name) for f in self.__plain_fields__)


def _eq(self, other):
    if other.__class__ is self.__class__:
        return _values(self) == _values(other)
    return NotImplemented


def _hash(self) -> int:
    return hash(_values(self))


def _frozen_methods(cls, names: tuple):
    """``__setattr__`` and ``__delattr__`` of a frozen dataclass: no attribute of the class itself, and no field
    of a subclass, can be set or deleted (``dataclasses.FrozenInstanceError``)."""
    fields = frozenset(names)

    def __setattr__(self, name, value):
        if type(self) is cls or name in fields:
            raise _frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self, name):
        if type(self) is cls or name in fields:
            raise _frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return ("__setattr__", __setattr__), ("__delattr__", __delattr__)


def _frozen_error(message: str):
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


class _DataclassFields:
    """The class's ``__dataclass_fields__``, made by :mod:`dataclasses` the first time it is asked for (the
    fields of an equal dataclass), so its functions treat the class as a dataclass."""

    def __get__(self, obj, owner):
        import dataclasses

        ns: dict = {"__annotations__": {}, "__module__": owner.__module__}
        for f in owner.__plain_fields__:
            ns["__annotations__"][f.name] = "object"
            if f.default_factory is not _MISSING:
                ns[f.name] = dataclasses.field(default_factory=f.default_factory)
            elif f.default is not _MISSING:
                ns[f.name] = f.default
        twin = dataclasses.dataclass(type(owner.__name__, (), ns), frozen=owner.__plain_frozen__)
        real = twin.__dataclass_fields__
        type.__setattr__(owner, "__dataclass_fields__", real)
        return real
