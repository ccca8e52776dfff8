"""The outcome of one attack on one release, in the form the gate and the data steward read."""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from audits.stats import baseline_corrected_risk, wilson_interval
from trajpub.errors import ParameterError

if TYPE_CHECKING:
    from audits.controls import MemberControl

MAX_EXAMPLES = 5


@dataclass(frozen=True)
class AttackResult:
    """An attack's success rate with its confidence interval, next to a baseline, as Anonymeter reports it.

    Given: ``attack`` (its name, the key of the gate policy), ``n_targets`` (the records attacked),
    ``n_successes`` (how many the attack got right; an expected count, hence a float, when the attack breaks
    ties uniformly at random), ``baseline`` (the success rate of a random guess or of the attack on a control)
    and ``evidence`` (JSON-serialisable; at most :data:`MAX_EXAMPLES` concrete cases under ``"examples"``).

    Derived, never given, so they cannot disagree with the counts:

    - ``success_rate = n_successes / n_targets``;
    - ``ci_low, ci_high``: the Wilson score interval of the success rate (:func:`audits.stats.wilson_interval`);
    - ``risk``: the baseline-corrected risk ``max(0, (success_rate - baseline) / (1 - baseline))``
      (:func:`audits.stats.baseline_corrected_risk`, Anonymeter's form).

    ``risk_ci_low, risk_ci_high``: the interval of the risk, what the gate decides on (docs/design.md, "Audits and
    the gate"). Left out, it is the correction applied to the ends of the rate's interval: ``(s - b) / (1 - b)``
    clipped at 0 is non-decreasing in the rate ``s`` for a baseline ``b`` that is an exact probability (a random
    guess, not an estimate), so the interval of the rate maps through it end for end. An attack whose baseline is
    itself measured gives the interval it computed on the difference instead; it must lie in [0, 1] and contain
    ``risk``.

    Against controls (``controls``, a :class:`audits.controls.MemberControl`: the attacks on releases without
    owners), the members are the targets and the controls the baseline: ``n_targets`` is the number of members,
    ``success_rate`` the member rate (or the AUC) with its own interval, ``baseline`` the control rate (or 1/2),
    and the risk interval is the comparison's (Newcombe's or DeLong's), which carries the controls' uncertainty
    too. Build such a result with :meth:`against_controls`.
    """

    attack: str
    n_targets: int
    n_successes: float
    baseline: float
    evidence: dict[str, Any] = field(default_factory=dict)
    confidence: float = 0.95
    controls: MemberControl | None = None
    risk_ci_low: float | None = None
    risk_ci_high: float | None = None
    success_rate: float = field(init=False)
    ci_low: float = field(init=False)
    ci_high: float = field(init=False)
    risk: float = field(init=False)

    def __post_init__(self) -> None:
        where = f"attack result {self.attack!r}"
        if not self.attack:
            raise ParameterError("an attack result needs the attack's name", "attack result")
        if not (isinstance(self.n_targets, numbers.Integral) and not isinstance(self.n_targets, bool)
                and self.n_targets >= 1):
            raise ParameterError(f"n_targets must be a positive integer, got {self.n_targets!r}", where)
        if not (isinstance(self.n_successes, numbers.Real) and math.isfinite(self.n_successes)
                and 0 <= self.n_successes <= self.n_targets):
            raise ParameterError(f"n_successes must be in [0, {self.n_targets}], got {self.n_successes}", where)
        if not (isinstance(self.baseline, numbers.Real) and 0 <= self.baseline <= 1):
            raise ParameterError(f"baseline must be in [0, 1], got {self.baseline}", where)
        try:
            evidence = json.loads(json.dumps(self.evidence, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ParameterError(f"evidence must be JSON-serialisable without NaN: {exc}", where) from exc
        if not isinstance(evidence, dict):
            raise ParameterError("evidence must be a mapping", where)
        if len(evidence.get("examples", [])) > MAX_EXAMPLES:
            raise ParameterError(f"evidence holds more than {MAX_EXAMPLES} examples", where)
        n_targets, n_successes, baseline = int(self.n_targets), float(self.n_successes), float(self.baseline)
        rate = n_successes / n_targets
        low, high = wilson_interval(n_successes, n_targets, self.confidence)
        risk = baseline_corrected_risk(rate, baseline)
        if (self.risk_ci_low is None) != (self.risk_ci_high is None):
            raise ParameterError("give both ends of the risk's interval or neither", where)
        if self.controls is not None:
            c = self.controls
            if (n_targets, baseline, self.confidence) != (c.n_members, c.control_value, c.confidence) or not \
                    math.isclose(rate, c.member_value, abs_tol=1e-12) or self.risk_ci_low is not None:
                raise ParameterError("n_targets, n_successes, baseline, confidence and the risk's interval must be "
                                     "the comparison's (use AttackResult.against_controls)", where)
            (low, high), (risk_low, risk_high) = c.member_ci, c.risk_ci
        elif self.risk_ci_low is None:
            risk_low, risk_high = baseline_corrected_risk(low, baseline), baseline_corrected_risk(high, baseline)
        else:
            risk_low, risk_high = self.risk_ci_low, self.risk_ci_high
            if not all(isinstance(v, numbers.Real) and math.isfinite(v) for v in (risk_low, risk_high)) or not (
                    0 <= risk_low <= risk + 1e-12 and risk - 1e-12 <= risk_high <= 1):
                raise ParameterError(f"the risk's interval must lie in [0, 1] and contain the risk {risk:.4g}, got "
                                     f"[{risk_low}, {risk_high}]", where)
        derived = {"n_targets": n_targets, "n_successes": n_successes, "baseline": baseline, "evidence": evidence,
                   "success_rate": rate, "ci_low": low, "ci_high": high, "risk": risk,
                   "risk_ci_low": float(risk_low), "risk_ci_high": float(risk_high)}
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @classmethod
    def against_controls(cls, attack: str, comparison: MemberControl, evidence: dict[str, Any]) -> AttackResult:
        """The result of an attack that scored members against controls (:mod:`audits.controls`)."""
        return cls(attack=attack, n_targets=comparison.n_members,
                   n_successes=comparison.member_value * comparison.n_members, baseline=comparison.control_value,
                   evidence=evidence, confidence=comparison.confidence, controls=comparison)

    def with_evidence(self, evidence: dict[str, Any]) -> AttackResult:
        """The same result with other evidence (its figures and interval unchanged)."""
        if self.controls is not None:
            return AttackResult.against_controls(self.attack, self.controls, evidence)
        return replace(self, evidence=evidence)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values, for the audit table and the steward's report."""
        controls = {} if self.controls is None else {"controls": self.controls.to_dict()}
        return {
            "attack": self.attack,
            "n_targets": self.n_targets,
            "n_successes": self.n_successes,
            "success_rate": self.success_rate,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "confidence": self.confidence,
            "baseline": self.baseline,
            "risk": self.risk,
            "risk_ci_low": self.risk_ci_low,
            "risk_ci_high": self.risk_ci_high,
            "evidence": json.loads(json.dumps(self.evidence)),
            **controls,
        }
