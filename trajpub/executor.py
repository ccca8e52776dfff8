"""The executor a partitioned mechanism runs on (:class:`Executor`): a Dask ``distributed.Client`` in the
release flow, or :class:`LocalExecutor` in this process (the local runner, tests, notebooks).

A mechanism that distributes its work (:meth:`trajpub.mechanism.Mechanism.partitioned`) uses only ``submit``,
``map``, ``gather``, ``scatter`` and ``scheduler_info`` of its executor, so the same code runs on both; it is
named ``executor`` wherever a mechanism receives it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import fields
from functools import reduce
from typing import Any, Protocol


class Executor(Protocol):
    """The part of Dask's client interface a mechanism may use; ``distributed.Client`` and :class:`LocalExecutor`
    both have it."""

    def submit(self, fn: Callable, *args, pure: bool = True, key: str | None = None, **kwargs) -> Any: ...

    def map(self, fn: Callable, *iterables: Iterable, pure: bool = True, **kwargs) -> list: ...

    def gather(self, futures: Any) -> Any: ...

    def scatter(self, data: list, broadcast: bool = False, hash: bool = True) -> list: ...

    def scheduler_info(self) -> dict: ...


def summed(executor: Executor, fn: Callable, prepared: list, **kwargs) -> Any:
    """The sum of ``fn(part, **kwargs)`` over the partitions: computed on the workers, added on the driver with
    the results' own ``add`` (counts of disjoint sets of objects add up)."""
    parts = executor.gather(executor.map(fn, prepared, pure=False, **kwargs))
    return reduce(lambda total, part: total.add(part), parts)


class Counts:
    """Base of a dataclass of counts over disjoint sets of objects: ``add`` sums them field by field, as
    :func:`summed` adds the partitions' counts."""

    def add(self, other):
        return type(self)(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})


class Done:
    """A computed value in the shape of a Dask future (``result()``)."""

    def __init__(self, value: Any):
        self.value = value

    def result(self) -> Any:
        return self.value


def _value(arg: Any) -> Any:
    """An argument as a Dask worker would receive it: futures, also inside lists and tuples, are resolved."""
    if isinstance(arg, Done):
        return arg.value
    if isinstance(arg, list | tuple):
        return type(arg)(_value(a) for a in arg)
    return arg


class LocalExecutor:
    """Dask's client interface, computed eagerly in this process (one "worker")."""

    def submit(self, fn: Callable, *args, pure: bool = True, key: str | None = None, **kwargs) -> Done:
        return Done(fn(*map(_value, args), **{k: _value(v) for k, v in kwargs.items()}))

    def map(self, fn: Callable, *iterables: Iterable, pure: bool = True, **kwargs) -> list[Done]:
        return [self.submit(fn, *args, **kwargs) for args in zip(*iterables, strict=True)]

    def gather(self, futures):
        return _value(futures)

    def scatter(self, data: list, broadcast: bool = False, hash: bool = True) -> list[Done]:
        return [Done(d) for d in data]

    def scheduler_info(self) -> dict:
        return {"workers": {"local": {}}}
