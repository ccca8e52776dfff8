"""The audit gate: a policy of thresholds, and the decision to block a release or pass it to the steward.

docs/design.md, "Audits and the gate": the gate runs the attacks a real adversary would run on the candidate
release and blocks it when a policy threshold is crossed, by default when the upper end of a risk's confidence
interval is (a verdict that holds from one draw of the release to the next, not a coin flip at the threshold).
Thresholds apply to the baseline-corrected risk of :class:`audits.result.AttackResult` (comparable across
mechanisms, unlike their privacy parameters: Jin et al., TKDE 2023, Sec. 5.3), and optionally to utility errors (a
release too distorted to be worth publishing).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from audits.controls import ControlPolicy
from audits.registry import ATTACKS, RELEASE_KINDS, build_attack
from audits.result import AttackResult
from audits.utility import UTILITY_MEANING, UTILITY_METRICS, UTILITY_SCORES
from trajpub.errors import ParameterError
from trajpub.yamlfile import read_yaml

DECISION_RULES = ("block_if_any",)
DECIDE_ON = ("upper_bound", "point")
"""What the gate compares with an attack's threshold: the upper end of the risk's confidence interval (a release
passes only when even that is at or under the threshold) or the point estimate (docs/design.md, "Audits and the
gate")."""
VERDICTS = ("passes", "too close to call", "blocked")
"""An attack's three-way verdict on its risk interval, from best to worst (:func:`verdict`)."""
NOT_APPLICABLE_RULES = ("block", "pass")
"""What an attack that cannot measure a release (:class:`audits.attack.NotApplicable`) does to the gate."""


@dataclass(frozen=True)
class GatePolicy:
    """Which attacks run, each one's ceiling on risk and its parameters, and optional ceilings on utility errors.

    ``max_risk``: attack name (:data:`audits.registry.ATTACKS`) -> the largest acceptable baseline-corrected
    risk, in [0, 1]; at least one. An attack runs on a release when the registry says it applies to the
    release's kind (truthful, synthetic, aggregate) and, if ``products`` lists kinds for it, the kind is listed.
    ``attack_params``: attack name -> its parameters (checked by building the attack).
    ``utility``: the utility floor, per release kind: kind -> metric name -> :class:`UtilityLimit`. An error
    metric (:data:`audits.utility.UTILITY_METRICS`, lower is better) takes a ``max``, a score
    (:data:`audits.utility.UTILITY_SCORES`, higher is better) a ``min``; every metric listed for the release's
    kind must be reported to :func:`evaluate_gate` as a finite number, or the release is blocked.
    ``timeout_s``: how long one attack may run; an attack that errors or runs out of time blocks the release.
    ``when_not_applicable``: attack name -> ``"block"`` or ``"pass"``, what the gate does when the attack says it
    cannot measure the release (home/work on a window without night hours); ``"block"`` (fail closed) unless set.
    ``resolutions_m``: the grid cell sizes (metres) the adversary tries: every attack that reads grid cells
    (:data:`audits.registry.GRID_ATTACKS`) runs at each, on a grid over the release's bbox independent of the
    mechanism's grid, and the gate takes its worst risk; empty: the release's own grid only.
    ``controls``: the control objects of releases without owners (:class:`audits.controls.ControlPolicy`: the
    share held out of a synthetic release's input, and when members against controls are too few to measure).
    ``decide_on``: ``"upper_bound"`` (the default: an attack passes when the upper end of its risk's confidence
    interval is at or under its ``max_risk``, so an interval that crosses the threshold blocks) or ``"point"``
    (the point estimate decides; a crossing interval passes when the estimate is under). Either way each attack's
    three-way :func:`verdict` is shown.
    ``version``: the policy's own version, recorded with every decision. ``decision``: the rule; the only one is
    ``block_if_any`` (block when any gated attack exceeds its ceiling, any attack fails or is not applicable
    where the policy says block, any listed utility metric is beyond its limit or is missing, or no attack
    applies).

    In YAML (see ``audits/policies/default.yaml``)::

        version: 2
        decision: block_if_any
        decide_on: upper_bound
        timeout_s: 300
        attacks:
          signature_linkage: {max_risk: 0.2}
          home_work: {max_risk: 0.3, params: {timezone: Asia/Shanghai}, products: [truthful],
                      when_not_applicable: pass}
        utility:
          synthetic:
            density_jsd: {max: 0.5}
            pattern_f1: {min: 0.2}
          aggregate:
            fragments: {min: 1}
    """

    max_risk: Mapping[str, float]
    utility: Mapping[str, Mapping[str, UtilityLimit]] = field(default_factory=dict)
    attack_params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    attack_products: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    when_not_applicable: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 300.0
    version: int = 1
    decision: str = "block_if_any"
    resolutions_m: tuple[float, ...] = ()
    controls: ControlPolicy = field(default_factory=ControlPolicy)
    decide_on: str = "upper_bound"

    def __post_init__(self) -> None:
        if not self.max_risk:
            raise ParameterError("a gate policy needs at least one attack threshold", "gate policy: attacks")
        _check_names(self.max_risk, set(ATTACKS), "gate policy: attacks")
        _check_names(self.attack_params, set(self.max_risk), "gate policy: attacks (params)")
        _check_names(self.attack_products, set(self.max_risk), "gate policy: attacks (products)")
        _check_names(self.when_not_applicable, set(self.max_risk), "gate policy: attacks (when_not_applicable)")
        for name, rule in self.when_not_applicable.items():
            if rule not in NOT_APPLICABLE_RULES:
                raise ParameterError(f"when_not_applicable must be one of {', '.join(NOT_APPLICABLE_RULES)}, got "
                                     f"{rule!r}", f"gate policy: attacks.{name}.when_not_applicable")
        _check_names(self.utility, set(RELEASE_KINDS), "gate policy: utility")
        for name, limit in self.max_risk.items():
            if not (_is_number(limit) and 0 <= limit <= 1):
                raise ParameterError(f"max_risk must be a number in [0, 1], got {limit!r}",
                                     f"gate policy: attacks.{name}")
        for name, params in self.attack_params.items():
            if not isinstance(params, Mapping):
                raise ParameterError(f"params must be a mapping, got {params!r}", f"gate policy: attacks.{name}")
            build_attack(name, params)  # unknown or invalid parameters fail here, not at audit time
        for name, kinds in self.attack_products.items():
            bad = [k for k in kinds if k not in RELEASE_KINDS]
            if bad or not kinds:
                raise ParameterError(f"products must be a non-empty list of {', '.join(RELEASE_KINDS)}, got "
                                     f"{list(kinds)!r}", f"gate policy: attacks.{name}.products")
        for kind, limits in self.utility.items():
            _check_names(limits, UTILITY_METRICS | UTILITY_SCORES, f"gate policy: utility.{kind}")
            for name, limit in limits.items():
                if not isinstance(limit, UtilityLimit):
                    raise ParameterError(f"expected a UtilityLimit, got {limit!r}", f"gate policy: utility.{kind}.{name}")
                limit.check(name, f"gate policy: utility.{kind}.{name}")
        if not (_is_number(self.timeout_s) and self.timeout_s > 0):
            raise ParameterError(f"timeout_s must be a positive number, got {self.timeout_s!r}",
                                 "gate policy: timeout_s")
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1:
            raise ParameterError(f"version must be a positive integer, got {self.version!r}", "gate policy: version")
        if self.decision not in DECISION_RULES:
            raise ParameterError(f"decision must be one of {', '.join(DECISION_RULES)}, got {self.decision!r}",
                                 "gate policy: decision")
        if self.decide_on not in DECIDE_ON:
            raise ParameterError(f"decide_on must be one of {', '.join(DECIDE_ON)}, got {self.decide_on!r}",
                                 "gate policy: decide_on")
        if not (isinstance(self.resolutions_m, tuple) and all(_is_number(r) and r > 0 for r in self.resolutions_m)):
            raise ParameterError(f"resolutions_m must be a list of positive cell sizes in metres, got "
                                 f"{self.resolutions_m!r}", "gate policy: resolutions_m")
        if not isinstance(self.controls, ControlPolicy):
            raise ParameterError(f"expected a ControlPolicy, got {self.controls!r}", "gate policy: controls")
        for name in ("max_risk", "attack_params", "when_not_applicable"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        object.__setattr__(self, "utility",
                           MappingProxyType({k: MappingProxyType(dict(v)) for k, v in self.utility.items()}))
        object.__setattr__(self, "attack_products",
                           MappingProxyType({k: tuple(v) for k, v in self.attack_products.items()}))

    def in_timezone(self, timezone: str | None) -> GatePolicy:
        """This policy with ``timezone`` (the dataset's local zone) as the ``timezone`` parameter of every attack
        that reads local hours (home/work) and whose parameters do not set one; unchanged when it is None."""
        if timezone is None:
            return self
        params = {name: dict(self.attack_params.get(name, {})) for name in self.max_risk}
        for name, p in params.items():
            if "timezone" in {f.name for f in fields(ATTACKS[name].params)}:
                p.setdefault("timezone", timezone)
        return replace(self, attack_params={name: p for name, p in params.items() if p})

    def not_applicable_rule(self, name: str) -> str:
        """What the gate does when attack ``name`` cannot measure a release: the policy's rule, else block."""
        return self.when_not_applicable.get(name, "block")

    def decides_on(self, result: AttackResult) -> float:
        """The figure of ``result`` this policy compares with its threshold: the risk's upper bound or its point
        estimate (``decide_on``)."""
        return result.risk_ci_high if self.decide_on == "upper_bound" else result.risk

    def passes(self, result: AttackResult) -> bool:
        """Whether ``result`` is within its attack's ceiling under this policy (True for an attack it does not
        gate). A figure equal to its limit passes."""
        limit = self.max_risk.get(result.attack)
        return limit is None or self.decides_on(result) <= limit

    def attacks_for(self, release_kind: str) -> list[str]:
        """The policy's attacks that run on a release of this kind."""
        return sorted(name for name in self.max_risk
                      if release_kind in ATTACKS[name].release_kinds
                      and release_kind in self.attack_products.get(name, RELEASE_KINDS))

    @classmethod
    def from_dict(cls, policy: Mapping[str, Any], where: str = "gate policy") -> GatePolicy:
        """Read the YAML layout above; unknown keys raise."""
        if not isinstance(policy, Mapping):
            raise ParameterError(f"a gate policy must be a mapping, got {type(policy).__name__}", where)
        _check_names(policy, {"attacks", "utility", "version", "decision", "decide_on", "timeout_s", "resolutions_m",
                              "controls"},
                     where)
        attacks = policy.get("attacks")
        if not isinstance(attacks, Mapping):
            raise ParameterError(f"expected a mapping of name -> {{max_risk: value}}, got {attacks!r}",
                                 f"{where}: attacks")
        max_risk, params, products, not_applicable = {}, {}, {}, {}
        for name, entry in attacks.items():
            if not isinstance(entry, Mapping) or "max_risk" not in entry:
                raise ParameterError(f"expected {{max_risk: value}}, got {entry!r}", f"{where}: attacks.{name}")
            _check_names(entry, {"max_risk", "params", "products", "when_not_applicable"}, f"{where}: attacks.{name}")
            max_risk[name] = entry["max_risk"]
            if "params" in entry:
                params[name] = entry["params"]
            if "products" in entry:
                products[name] = tuple(entry["products"]) if isinstance(entry["products"], list | tuple) else ()
            if "when_not_applicable" in entry:
                not_applicable[name] = entry["when_not_applicable"]
        utility = _utility_limits(policy.get("utility") or {}, f"{where}: utility")
        return cls(max_risk=max_risk, utility=utility, attack_params=params, attack_products=products,
                   when_not_applicable=not_applicable,
                   timeout_s=policy.get("timeout_s", 300.0), version=policy.get("version", 1),
                   decision=policy.get("decision", "block_if_any"), decide_on=policy.get("decide_on", "upper_bound"),
                   resolutions_m=tuple(r) if isinstance(r := policy.get("resolutions_m", ()), list | tuple) else r,
                   controls=ControlPolicy.from_dict(policy.get("controls", {}), f"{where}: controls"))

    @classmethod
    def from_yaml(cls, path: str | Path) -> GatePolicy:
        """Load a policy file (YAML, the layout of :meth:`from_dict`; size- and alias-limited)."""
        return cls.from_dict(read_yaml(path, "gate policy"), where=f"file {path}")

    @classmethod
    def default(cls) -> GatePolicy:
        """The policy shipped with the package, ``audits/policies/default.yaml``."""
        with resources.as_file(resources.files("audits") / "policies" / "default.yaml") as path:
            return cls.from_yaml(path)

    def to_dict(self) -> dict[str, Any]:
        attacks = {}
        for name, limit in self.max_risk.items():
            attacks[name] = {"max_risk": limit}
            if name in self.attack_params:
                attacks[name]["params"] = dict(self.attack_params[name])
            if name in self.attack_products:
                attacks[name]["products"] = list(self.attack_products[name])
            if name in self.when_not_applicable:
                attacks[name]["when_not_applicable"] = self.when_not_applicable[name]
        return {"version": self.version, "decision": self.decision, "decide_on": self.decide_on,
                "timeout_s": self.timeout_s, "resolutions_m": list(self.resolutions_m),
                "controls": self.controls.to_dict(), "attacks": attacks,
                "utility": {kind: {name: {limit.bound: limit.value} for name, limit in limits.items()}
                            for kind, limits in self.utility.items()}}


@dataclass(frozen=True)
class UtilityLimit:
    """One entry of the utility floor: ``bound`` is ``"max"`` (an error metric may not exceed ``value``) or
    ``"min"`` (a score may not fall below it). A value equal to its limit passes."""

    bound: str
    value: float

    def check(self, name: str, where: str) -> None:
        """Refuse a bound that points the wrong way for the metric (a floor on an error gates nothing useful)."""
        expected = "max" if name in UTILITY_METRICS else "min"
        if self.bound != expected:
            kind = "an error (lower is better)" if expected == "max" else "a score (higher is better)"
            raise ParameterError(f"{name} is {kind}: give it {{{expected}: value}}, not {self.bound}", where)
        if not (_is_number(self.value) and math.isfinite(self.value) and self.value >= 0):
            raise ParameterError(f"{self.bound} must be a finite non-negative number, got {self.value!r}", where)

    def allows(self, value: float) -> bool:
        return value <= self.value if self.bound == "max" else value >= self.value


@dataclass(frozen=True)
class GateDecision:
    """Whether the release is blocked, every reason in words, and each attack's and metric's standing.

    ``per_attack[name]["status"]`` is ``"passed"``, ``"blocked"`` (the policy's ``decide_on`` applied; a measured
    attack also has its three-way ``"verdict"``, :func:`verdict`, and its ``"risk_ci"``), ``"not gated"`` (a
    result the policy sets no threshold for), ``"failed"`` (an error or a timeout: blocks), ``"not applicable"``
    (with ``why`` and the policy's ``when_not_applicable``, which says whether it blocks) or ``"not run"`` (a
    threshold without a result); ``per_utility[name]["status"]`` is
    ``"passed"``, ``"blocked"``, ``"missing"`` (listed by the policy, not computed: blocks) or ``"not gated"``.
    ``privacy`` and ``utility`` are the two verdicts the review shows side by side: ``"passed"`` or
    ``"blocked"`` (``utility`` is ``"not gated"`` when the policy sets no floor for the release's kind).
    """

    blocked: bool
    reasons: list[str]
    per_attack: dict[str, dict[str, Any]]
    per_utility: dict[str, dict[str, Any]] = field(default_factory=dict)
    privacy: str = "passed"
    utility: str = "not gated"

    def to_dict(self) -> dict[str, Any]:
        return {"blocked": self.blocked, "reasons": list(self.reasons), "privacy": self.privacy,
                "utility": self.utility, "per_attack": dict(self.per_attack), "per_utility": dict(self.per_utility)}


def evaluate_gate(policy: GatePolicy, results: list[AttackResult], release_kind: str,
                  utility: Mapping[str, Any] | None = None,
                  failures: Mapping[str, str] | None = None,
                  not_applicable: Mapping[str, str] | None = None) -> GateDecision:
    """Block when any attack's risk exceeds its ``max_risk`` (its upper confidence bound, or its point estimate
    when the policy's ``decide_on`` says ``point``) or a utility figure is beyond the limit the policy sets for
    ``release_kind`` (truthful, synthetic, aggregate). ``results``: one per attack (:func:`worst_per_attack`).

    Fails closed: it also blocks when an attack failed (``failures``: name -> what went wrong, an error or a
    timeout), when an attack is not applicable (``not_applicable``: name -> why) unless the policy's
    ``when_not_applicable`` says ``pass`` for it, when no result matches a threshold of the policy (nothing was
    gated) and when a utility metric the policy lists for the kind was not reported or is not a finite number. A
    value equal to its limit passes.
    """
    if release_kind not in RELEASE_KINDS:
        raise ParameterError(f"release_kind must be one of {', '.join(RELEASE_KINDS)}, got {release_kind!r}",
                             "evaluate_gate")
    names = [r.attack for r in results]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ParameterError(f"several results for attack(s) {', '.join(duplicated)}", "evaluate_gate")
    reasons: list[str] = []
    per_attack: dict[str, dict[str, Any]] = {}
    for result in results:
        limit = policy.max_risk.get(result.attack)
        interval = f"{result.confidence:.0%} CI [{result.risk_ci_low:.3f}, {result.risk_ci_high:.3f}]"
        entry = {"threshold": limit, "risk": result.risk, "risk_ci": [result.risk_ci_low, result.risk_ci_high],
                 "success_rate": result.success_rate, "ci": [result.ci_low, result.ci_high],
                 "baseline": result.baseline, "n_targets": result.n_targets}
        if limit is None:
            per_attack[result.attack] = {"status": "not gated", **entry}
            continue
        said = verdict(result, limit)
        passed = policy.passes(result)
        if not passed:
            why = ("the whole interval is above it" if said == "blocked" else
                   "too close to call (the interval crosses it), which blocks: the policy decides on the upper bound"
                   if policy.decide_on == "upper_bound" else
                   "too close to call (the interval crosses it) and the point estimate, which the policy decides on, "
                   "is above it")
            reasons.append(f"{result.attack}: risk {result.risk:.3f}, {interval}, against max_risk {limit:g}: "
                           f"blocked, {why} (success rate {result.success_rate:.3f}, baseline "
                           f"{result.baseline:.4f}, {result.n_targets} targets)")
        per_attack[result.attack] = {"status": "passed" if passed else "blocked", "verdict": said, **entry}
    for name, why in (failures or {}).items():
        reasons.append(f"{name}: the attack failed ({why}); the gate fails closed")
        per_attack[name] = {"status": "failed", "threshold": policy.max_risk.get(name), "error": why}
    for name, why in (not_applicable or {}).items():
        rule = policy.not_applicable_rule(name)
        if rule == "block":
            reasons.append(f"{name}: not applicable ({why}); the policy blocks a release this attack cannot measure")
        per_attack[name] = {"status": "not applicable", "threshold": policy.max_risk.get(name), "why": why,
                            "when_not_applicable": rule}
    for name, limit in policy.max_risk.items():
        per_attack.setdefault(name, {"status": "not run", "threshold": limit})
    if not any(entry["status"] in ("passed", "blocked") for entry in per_attack.values()):
        reasons.append(f"no attack result matches the policy's attacks ({', '.join(sorted(policy.max_risk))}): "
                       "nothing was gated")
    privacy_blocked = bool(reasons)
    per_utility: dict[str, dict[str, Any]] = {}
    reported = dict(utility or {})
    for name, value in reported.items():
        if name in UTILITY_METRICS or name in UTILITY_SCORES:
            per_utility[name] = {"value": value, "status": "not gated"}
    limits = policy.utility.get(release_kind, {})
    for name, limit in limits.items():
        value = reported.get(name)
        entry = {"value": value, limit.bound: limit.value}
        if value is None or not _is_number(value) or not math.isfinite(value):
            reasons.append(f"utility {name} could not be computed ({value!r}) and the policy requires "
                           f"{'at most' if limit.bound == 'max' else 'at least'} {limit.value:g} "
                           f"for a {release_kind} release; the gate fails closed")
            entry["status"] = "missing"
        elif not limit.allows(value):
            reasons.append(f"utility {name} = {value:.4g} is {'above' if limit.bound == 'max' else 'below'} the "
                           f"policy's {limit.bound} {limit.value:g} for a {release_kind} release "
                           f"({UTILITY_MEANING[name]})")
            entry["status"] = "blocked"
        else:
            entry["status"] = "passed"
        per_utility[name] = entry
    utility_blocked = any(e["status"] in ("blocked", "missing") for e in per_utility.values())
    return GateDecision(blocked=bool(reasons), reasons=reasons, per_attack=per_attack, per_utility=per_utility,
                        privacy="blocked" if privacy_blocked else "passed",
                        utility="blocked" if utility_blocked else "passed" if limits else "not gated")


def verdict(result: AttackResult, limit: float) -> str:
    """The three-way verdict of ``result`` against the ceiling ``limit``, read off the risk's confidence interval:
    ``"passes"`` (its upper end is at or under the limit), ``"blocked"`` (its lower end is above) or ``"too close
    to call"`` (the interval contains values on both sides). Whether a release that is too close to call passes
    is the policy's ``decide_on``; the verdict itself does not depend on it."""
    if result.risk_ci_high <= limit:
        return "passes"
    return "blocked" if result.risk_ci_low > limit else "too close to call"


def worst_per_attack(policy: GatePolicy, results: list[tuple[float, AttackResult]]) -> list[AttackResult]:
    """Each attack's worst result over the resolutions it ran at (the gate decides on the worst case): the worst
    :func:`verdict`, then the largest figure the policy decides on (:meth:`GatePolicy.decides_on`), then the
    largest risk. So the attack blocks when any of its resolutions does, and a result passed to the steward is
    the one nearest its threshold."""
    def badness(r: AttackResult) -> tuple:
        limit = policy.max_risk.get(r.attack)
        return (-1 if limit is None else VERDICTS.index(verdict(r, limit)), policy.decides_on(r), r.risk)

    worst: dict[str, AttackResult] = {}
    for _, r in results:
        if r.attack not in worst or badness(r) > badness(worst[r.attack]):
            worst[r.attack] = r
    return list(worst.values())


def _check_names(mapping: Mapping[str, Any], allowed: frozenset[str] | set[str], where: str) -> None:
    unknown = sorted(str(k) for k in mapping if k not in allowed)
    if unknown:
        raise ParameterError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}", where)


def _utility_limits(section: Any, where: str) -> dict[str, dict[str, UtilityLimit]]:
    """``{kind: {metric: {max|min: value}}}`` -> ``{kind: {metric: UtilityLimit}}``, refusing other keys."""
    if not isinstance(section, Mapping):
        raise ParameterError(f"expected a mapping of release kind -> metric -> {{max|min: value}}, got {section!r}",
                             where)
    out: dict[str, dict[str, UtilityLimit]] = {}
    for kind, metrics in section.items():
        if not isinstance(metrics, Mapping):
            raise ParameterError(f"expected a mapping of metric -> {{max|min: value}}, got {metrics!r}",
                                 f"{where}.{kind}")
        out[kind] = {}
        for name, entry in metrics.items():
            if not isinstance(entry, Mapping) or len(entry) != 1 or next(iter(entry)) not in ("max", "min"):
                raise ParameterError(f"expected {{max: value}} or {{min: value}}, got {entry!r}",
                                     f"{where}.{kind}.{name}")
            (bound, value), = entry.items()
            out[kind][name] = UtilityLimit(bound, value)
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
