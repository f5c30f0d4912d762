"""``Record``: the equality, hash and repr a dataclass generates, for plain classes.

A subclass lists its fields in ``__slots__`` (in order) and writes its ``__init__``;
equality compares the fields as a tuple when both classes are the same (otherwise
``NotImplemented``), the hash is the hash of that tuple and the repr is
``Name(field=value!r, ...)``, as ``@dataclass(slots=True, unsafe_hash=True)`` makes
them (less the fields named in ``_unshown``, which a dataclass's ``field(repr=False)``
leaves out). A class whose instances are equal only to themselves (``eq=False``) sets
``__eq__ = object.__eq__`` and ``__hash__ = object.__hash__``.

Creating a dataclass costs 0.3-1 ms at import on Python 3.12 (it compiles each of its
methods), and ``check`` as a process imports a few dozen: the classes it imports are
Records, which cost nothing to create; their instances are built by a plain
``__init__``. A mutable default (a dataclass's ``default_factory``) is ``None`` in the
signature and a new value in ``__init__``.

Records and the classes that stay dataclasses are immutable by convention where they
are values (nothing assigns to a field after ``__init__``), not ``frozen=True``: a
frozen dataclass costs ~0.7 ms more to create at import, and its ``__init__`` sets each
field through ``object.__setattr__`` (3-5x slower to build).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any


class Record:
    """Eq, hash and repr over the fields a subclass lists in ``__slots__``."""

    __slots__ = ()
    _values: Callable[[Any], tuple[Any, ...]]  # the fields' values, in order
    #: fields the repr leaves out (a dataclass's ``field(repr=False)``)
    _unshown: tuple[str, ...] = ()
    _shown: tuple[str, ...] = ()
    #: each field's position in ``__slots__`` (and in ``__init__``'s arguments)
    _position: dict[str, int] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names: tuple[str, ...] = cls.__dict__.get("__slots__", ())
        if names:
            get: Callable[[Any], Any] = operator.attrgetter(*names)
            cls._values = staticmethod((lambda e: (get(e),)) if len(names) == 1 else get)
            cls._shown = tuple(n for n in names if n not in cls._unshown)
            cls._position = {n: i for i, n in enumerate(names)}

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values(self) == self._values(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values(self))

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._shown)
        return f"{self.__class__.__qualname__}({fields})"
