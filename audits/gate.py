"""The audit gate: a policy of thresholds, and the decision to block a release or pass it to the steward.

DESIGN.md, "Audits and the gate": the gate runs the attacks a real adversary would run on the candidate
release and blocks it when a policy threshold is crossed. Thresholds apply to the baseline-corrected risk of
:class:`audits.result.AttackResult` (comparable across mechanisms, unlike their privacy parameters: our survey
spec 6.4), and optionally to utility errors (a release too distorted to be worth publishing).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from audits.result import AttackResult
from audits.signature_linkage import SYNTHETIC_NAME, TRUTHFUL_NAME
from audits.utility import UTILITY_METRICS
from trajpub.errors import ParameterError

KNOWN_ATTACKS = frozenset({TRUTHFUL_NAME, SYNTHETIC_NAME})
"""Attack names a policy may set thresholds for: a misspelt name must fail loudly, never gate nothing."""


@dataclass(frozen=True)
class GatePolicy:
    """Per-attack ceilings on risk, and optional ceilings on utility errors.

    ``max_risk``: attack name -> the largest acceptable baseline-corrected risk, in [0, 1]; at least one.
    ``max_utility_error``: utility metric name (:data:`audits.utility.UTILITY_METRICS`) -> the largest
    acceptable value; every metric listed must be reported to :func:`evaluate_gate`.

    In YAML (see ``audits/policies/default.yaml``)::

        attacks:
          signature_linkage: {max_risk: 0.2}
        utility:
          density_jsd: {max: 0.3}
    """

    max_risk: Mapping[str, float]
    max_utility_error: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.max_risk:
            raise ParameterError("a gate policy needs at least one attack threshold", "gate policy: attacks")
        _check_names(self.max_risk, KNOWN_ATTACKS, "gate policy: attacks")
        _check_names(self.max_utility_error, UTILITY_METRICS, "gate policy: utility")
        for name, limit in self.max_risk.items():
            if not (_is_number(limit) and 0 <= limit <= 1):
                raise ParameterError(f"max_risk must be a number in [0, 1], got {limit!r}",
                                     f"gate policy: attacks.{name}")
        for name, limit in self.max_utility_error.items():
            if not (_is_number(limit) and limit >= 0):
                raise ParameterError(f"max must be a non-negative number, got {limit!r}",
                                     f"gate policy: utility.{name}")
        object.__setattr__(self, "max_risk", MappingProxyType(dict(self.max_risk)))
        object.__setattr__(self, "max_utility_error", MappingProxyType(dict(self.max_utility_error)))

    @classmethod
    def from_dict(cls, policy: Mapping[str, Any], where: str = "gate policy") -> GatePolicy:
        """Read ``{"attacks": {name: {"max_risk": r}}, "utility": {metric: {"max": e}}}``; unknown keys raise."""
        if not isinstance(policy, Mapping):
            raise ParameterError(f"a gate policy must be a mapping, got {type(policy).__name__}", where)
        _check_names(policy, {"attacks", "utility"}, where)
        attacks = _entries(policy.get("attacks"), "max_risk", f"{where}: attacks")
        utility = _entries(policy.get("utility") or {}, "max", f"{where}: utility")
        return cls(max_risk=attacks, max_utility_error=utility)

    @classmethod
    def from_yaml(cls, path: str | Path) -> GatePolicy:
        """Load a policy file (YAML, the layout of :meth:`from_dict`)."""
        try:
            policy = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ParameterError(f"not valid YAML: {exc}", f"file {path}") from exc
        return cls.from_dict(policy, where=f"file {path}")

    @classmethod
    def default(cls) -> GatePolicy:
        """The policy shipped with the package, ``audits/policies/default.yaml``."""
        with resources.as_file(resources.files("audits") / "policies" / "default.yaml") as path:
            return cls.from_yaml(path)

    def to_dict(self) -> dict[str, Any]:
        return {"attacks": {name: {"max_risk": limit} for name, limit in self.max_risk.items()},
                "utility": {name: {"max": limit} for name, limit in self.max_utility_error.items()}}


@dataclass(frozen=True)
class GateDecision:
    """Whether the release is blocked, every reason in words, and each attack's and metric's standing.

    ``per_attack[name]["status"]`` is ``"passed"``, ``"blocked"``, ``"not gated"`` (a result the policy sets no
    threshold for) or ``"not run"`` (a threshold without a result).
    """

    blocked: bool
    reasons: list[str]
    per_attack: dict[str, dict[str, Any]]
    per_utility: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"blocked": self.blocked, "reasons": list(self.reasons),
                "per_attack": dict(self.per_attack), "per_utility": dict(self.per_utility)}


def evaluate_gate(policy: GatePolicy, results: list[AttackResult],
                  utility: Mapping[str, float] | None = None) -> GateDecision:
    """Block when any attack's risk exceeds its ``max_risk`` or a listed utility error exceeds its ``max``.

    Fails closed: it also blocks when no result matches a threshold of the policy (nothing was gated) and when
    a utility metric the policy lists was not reported or is not a finite number. A risk equal to its
    ceiling passes.
    """
    names = [r.attack for r in results]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ParameterError(f"several results for attack(s) {', '.join(duplicated)}", "evaluate_gate")
    reasons: list[str] = []
    per_attack: dict[str, dict[str, Any]] = {}
    for result in results:
        limit = policy.max_risk.get(result.attack)
        if limit is None:
            status = "not gated"
        elif result.risk <= limit:
            status = "passed"
        else:
            status = "blocked"
            reasons.append(
                f"{result.attack}: risk {result.risk:.3f} exceeds max_risk {limit:g} (success rate "
                f"{result.success_rate:.3f}, {result.confidence:.0%} CI [{result.ci_low:.3f}, {result.ci_high:.3f}], "
                f"baseline {result.baseline:.4f}, {result.n_targets} targets)")
        per_attack[result.attack] = {"status": status, "threshold": limit, "risk": result.risk,
                                     "risk_ci": [result.risk_ci_low, result.risk_ci_high],
                                     "success_rate": result.success_rate, "ci": [result.ci_low, result.ci_high],
                                     "baseline": result.baseline, "n_targets": result.n_targets}
    for name, limit in policy.max_risk.items():
        per_attack.setdefault(name, {"status": "not run", "threshold": limit})
    if not any(entry["status"] in ("passed", "blocked") for entry in per_attack.values()):
        reasons.append(f"no attack result matches the policy's attacks ({', '.join(sorted(policy.max_risk))}): "
                       "nothing was gated")
    per_utility: dict[str, dict[str, Any]] = {}
    reported = dict(utility or {})
    for name, value in reported.items():
        per_utility[name] = {"value": value, "max": policy.max_utility_error.get(name)}
    for name, limit in policy.max_utility_error.items():
        value = reported.get(name)
        if value is None or not _is_number(value) or not math.isfinite(value):
            reasons.append(f"utility {name}: not reported as a finite number ({value!r}); the policy requires "
                           f"at most {limit:g}")
            per_utility[name] = {"value": value, "max": limit, "status": "missing"}
        elif value > limit:
            reasons.append(f"utility {name}: {value:.4f} exceeds max {limit:g}")
            per_utility[name]["status"] = "blocked"
        else:
            per_utility[name]["status"] = "passed"
    return GateDecision(blocked=bool(reasons), reasons=reasons, per_attack=per_attack, per_utility=per_utility)


def _check_names(mapping: Mapping[str, Any], allowed: frozenset[str] | set[str], where: str) -> None:
    unknown = sorted(str(k) for k in mapping if k not in allowed)
    if unknown:
        raise ParameterError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}", where)


def _entries(section: Any, key: str, where: str) -> dict[str, float]:
    """``{name: {key: value}}`` -> ``{name: value}``, refusing other keys."""
    if not isinstance(section, Mapping):
        raise ParameterError(f"expected a mapping of name -> {{{key}: value}}, got {section!r}", where)
    out = {}
    for name, entry in section.items():
        if not isinstance(entry, Mapping) or key not in entry:
            raise ParameterError(f"expected {{{key}: value}}, got {entry!r}", f"{where}.{name}")
        _check_names(entry, {key}, f"{where}.{name}")
        out[name] = entry[key]
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
