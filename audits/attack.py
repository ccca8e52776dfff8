"""The one lifecycle every attack follows: configured by frozen parameters, then ``evaluate(raw, release)``.

The auditor holds the raw data D (the adversary's background knowledge) and simulates the adversary against
the candidate release D* (docs/design.md, "Audits and the gate"). Modelled on Anonymeter's evaluators: one verb,
one result type with a confidence interval and a
baseline.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import fields
from typing import ClassVar, Generic, Self, TypeVar

import pandas as pd

from audits.result import AttackResult
from trajpub.errors import InputError
from trajpub.frame import require_columns
from trajpub.params import Scope

P = TypeVar("P")


class AttackParams:
    """What the attacks' frozen parameter dataclasses share: they are read from a gate policy's mapping and
    recorded back in it, and each error names the field through the class's :class:`trajpub.params.Scope`,
    ``scope`` (a class attribute, not a field)."""

    scope: ClassVar[Scope]

    @classmethod
    def from_dict(cls, d: dict) -> Self:
        """Parameters from a policy's mapping (its lists become tuples); an unknown key is an error, not ignored."""
        return cls.scope.from_mapping(cls, {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})

    def to_dict(self) -> dict:
        """The parameters as a policy writes them (tuples as lists)."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in fields(self)}  # type: ignore[arg-type]

    def require_seed_and_confidence(self) -> None:
        """``seed`` (of the attack's random draws) None or an integer >= 0, ``confidence`` in (0, 1)."""
        self.scope.require_optional_int(self.seed, "seed", 0)  # type: ignore[attr-defined]
        self.scope.require_real(self.confidence, "confidence", 0, 1 - 1e-12)  # type: ignore[attr-defined]


class NotApplicable(InputError):
    """The attack cannot measure this release at all (e.g. home/work inference on a release without timestamps,
    or on a window without night hours): not a failure of the attack, and not a risk of zero. The message says
    why; the gate policy decides whether that blocks the release (``when_not_applicable``)."""


class Attack(ABC, Generic[P]):
    """An attack configured by a frozen parameter dataclass ``P``.

    Subclasses name the columns they read and implement :meth:`_attack`; :meth:`evaluate` checks the two
    frames first, so every attack refuses the same malformed input with the same error.
    """

    def __init__(self, params: P):
        self.params = params

    @property
    @abstractmethod
    def name(self) -> str:
        """The attack's name: the key of its threshold in the gate policy."""

    @property
    @abstractmethod
    def raw_columns(self) -> tuple[str, ...]:
        """The columns the attack reads from the raw frame."""

    @property
    @abstractmethod
    def release_columns(self) -> tuple[str, ...]:
        """The columns the attack reads from the release frame."""

    def evaluate(self, raw: pd.DataFrame, release: pd.DataFrame) -> AttackResult:
        """Attack ``release`` (D*) with ``raw`` (D) as background knowledge."""
        for frame, columns, label in ((raw, self.raw_columns, "raw"), (release, self.release_columns, "release")):
            require_columns(frame, columns, f"{self.name}: {label} frame")
            if frame.empty:
                raise InputError(f"the {label} frame is empty: nothing to attack", f"{self.name}: {label} frame")
        return self._attack(raw, release)

    @abstractmethod
    def _attack(self, raw: pd.DataFrame, release: pd.DataFrame) -> AttackResult:
        """Run the attack on frames that have the declared columns and are not empty."""
