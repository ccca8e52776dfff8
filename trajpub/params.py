"""Checks shared by the mechanisms' parameter dataclasses: each error names the field as ``<scope>.<field>``."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from numbers import Integral, Real
from typing import TypeVar

from trajpub.errors import ParameterError

T = TypeVar("T")


@dataclass(frozen=True)
class Scope:
    """The parameters of one mechanism, named ``name`` in error messages (``"prefix_tree.height"``)."""

    name: str

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

    def require_choice(self, value: object, field: str, allowed: tuple[str, ...]) -> None:
        if value not in allowed:
            raise ParameterError(f"{field} must be one of {', '.join(allowed)}; got {value!r}", self.where(field))

    def from_mapping(self, cls: type[T], d: dict) -> T:
        """``cls(**d)`` for a frozen parameter dataclass; an unknown key is an error, not ignored."""
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(d) - set(allowed))
        if unknown:
            raise ParameterError(f"unknown parameter(s) {', '.join(map(repr, unknown))}; "
                                 f"allowed: {', '.join(allowed)}", self.where(unknown[0]))
        return cls(**d)
