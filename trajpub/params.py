"""Checks shared by the mechanisms' parameter dataclasses: each error names the field as ``<scope>.<field>``."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from numbers import Integral, Real
from typing import ClassVar, Self, TypeVar

from trajpub.errors import ParameterError

T = TypeVar("T")


@dataclass(frozen=True)
class Scope:
    """The parameters of one mechanism, named ``name`` in error messages (``"prefix_tree.height"``).

    ``required``: the parameters a release spec must give (no default is useful), named in every unknown- or
    missing-parameter error. ``resolved``: parameters the flow's adapter resolves itself (a road network or
    points of interest named in PostGIS): allowed in the mapping, but not fields of the dataclass.
    """

    name: str
    required: tuple[str, ...] = ()
    resolved: tuple[str, ...] = ()

    def where(self, field: str) -> str:
        return f"{self.name}.{field}"

    def require_int(self, value: object, field: str, minimum: int) -> None:
        if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
            raise ParameterError(f"{field} must be an integer >= {minimum}, got {value!r}", self.where(field))

    def require_optional_int(self, value: object, field: str, minimum: int) -> None:
        """``None``, or an integer >= ``minimum``."""
        if value is not None:
            self.require_int(value, field, minimum)

    def require_real(self, value: object, field: str, low: float, high: float = math.inf, *,
                     open_low: bool = True) -> None:
        ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)
        if ok:
            ok = (value > low if open_low else value >= low) and value <= high
        if not ok:
            bound = f"{'>' if open_low else '>='} {low:g}" + (f" and <= {high:g}" if math.isfinite(high) else "")
            raise ParameterError(f"{field} must be a finite number {bound}, got {value!r}", self.where(field))

    def require_bool(self, value: object, field: str) -> None:
        if not isinstance(value, bool):
            raise ParameterError(f"{field} must be true or false, got {value!r}", self.where(field))

    def require_choice(self, value: object, field: str, allowed: tuple[str, ...]) -> None:
        if value not in allowed:
            raise ParameterError(f"{field} must be one of {', '.join(allowed)}; got {value!r}", self.where(field))

    def from_mapping(self, cls: type[T], d: dict) -> T:
        """``cls(**d)`` for a frozen parameter dataclass, without the ``resolved`` keys; an unknown key is an
        error, not ignored, and so is a missing (or null) ``required`` one (after the values are checked)."""
        optional = [name for name in (*self.resolved, *(f.name for f in fields(cls))) if name not in self.required]
        listing = (f"required: {', '.join(self.required)}; " if self.required else "") + \
            f"optional: {', '.join(optional)}"
        unknown = sorted(set(d) - set(optional) - set(self.required))
        if unknown:
            raise ParameterError(f"unknown parameter(s) {', '.join(map(repr, unknown))}; {listing}",
                                 self.where(unknown[0]))
        parsed = cls(**{k: v for k, v in d.items() if k not in self.resolved})
        missing = [name for name in self.required if d.get(name) is None]
        if missing:
            raise ParameterError(f"missing required parameter(s) {', '.join(missing)}; {listing}",
                                 self.where(missing[0]))
        return parsed


class Params:
    """Base of a mechanism's frozen parameters dataclass (``@dataclass(frozen=True) class ToyParams(Params)``),
    whose ``scope`` names it in errors and lists its required and resolved keys: ``from_dict`` refuses unknown and
    missing keys (its ``__post_init__`` the out-of-range values), ``to_dict`` is the JSON-safe mapping that
    round-trips through it (a tuple field is a list there)."""

    scope: ClassVar[Scope]

    @classmethod
    def from_dict(cls, d: dict) -> Self:
        """Parameters from a release spec's mapping; an unknown key is an error, not ignored."""
        return cls.scope.from_mapping(cls, {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})

    def to_dict(self) -> dict:
        """The parameters as a JSON-serialisable mapping (round-trips through :meth:`from_dict`)."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}
