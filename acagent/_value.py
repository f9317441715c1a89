"""Value-class methods written once, for dataclasses that do not generate their own (issue 12).

``@dataclass`` writes each class's ``__init__``, ``__repr__`` and ``__eq__`` (frozen: also
``__setattr__``, ``__delattr__`` and ``__hash__``) as source text and compiles it when the class
is defined: 0.3–0.9 ms of CPU per class on the benchmark machine, about 30 ms for the classes a
one-shot ``acagent run`` defines. The classes on that path stay dataclasses (``fields``,
``replace``, orjson and :func:`acagent._text.clean_value` see them as before) but are declared
``@dataclass(repr=False, eq=False)`` over :class:`Record` (mutable) or
``@dataclass(init=False, repr=False, eq=False)`` over :class:`Frozen` with their ``__init__``
written out, which sets the fields with :func:`init_fields` (mypy checks its parameters; a
frozen class's tests pin the behaviour: ``tests/test_values.py``). These bases hold what the
generated methods did: ``==`` between instances of the same class compares every field in order,
a frozen instance hashes its fields and refuses assignment (:class:`dataclasses.FrozenInstanceError`),
a mutable one is unhashable, and the repr is the dataclass one (``Name(field=value, ...)``).
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields
from typing import Any, ClassVar

__all__ = ["Frozen", "Record", "init_fields"]

_NAMES: dict[type, tuple[str, ...]] = {}


def _names(cls: type) -> tuple[str, ...]:
    """The dataclass fields of ``cls`` in order (cached per class)."""
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def init_fields(obj: object, **values: Any) -> None:
    """Set fields of a freshly built ``obj`` (a :class:`Frozen` one too), in the order given."""
    obj.__dict__.update(values)


class Record:
    """Base of a mutable dataclass declared with ``repr=False, eq=False`` (see the module
    docstring): equality and repr over its fields; unhashable, like a dataclass with ``eq``."""

    __slots__ = ()
    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in _names(type(self))])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _names(type(self)))
        return f"{type(self).__qualname__}({shown})"


class Frozen(Record):
    """Base of a frozen dataclass declared with ``init=False, repr=False, eq=False`` and its own
    ``__init__`` (:func:`init_fields`): assignment and deletion raise
    :class:`~dataclasses.FrozenInstanceError`; the hash is that of its fields' values."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self._values())

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")
