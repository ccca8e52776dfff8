"""The privacy guarantee a mechanism really gives, in words a data steward can read verbatim."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from trajpub.errors import ParameterError

#: The ledger's currencies: each has its own cap and is never summed with another. Pufferfish and
#: heuristic guarantees are counted and shown apart from DP; heuristic ones spend no ε.
ACCOUNTS = ("epsilon-DP", "epsilon-LDP", "Pufferfish", "heuristic")
#: What a dataset protects, declared in ``governance.datasets.privacy_unit``: one object (a person, a vehicle:
#: all its records together) or one trajectory record.
UNITS = ("object", "record")
#: How a guarantee stated for its own unit becomes a guarantee for the dataset's unit.
RULES = ("per_object", "group_privacy", "not_dp")


@dataclass(frozen=True)
class Charge:
    """A guarantee in the dataset's unit, as the ledger charges it: ``epsilon`` is None for a heuristic
    guarantee and infinite when nothing bounds an object's contribution; ``how`` says how it was derived."""

    account: str
    unit: str
    epsilon: float | None
    delta: float
    how: str

    @property
    def bounded(self) -> bool:
        return self.epsilon is None or math.isfinite(self.epsilon)


@dataclass(frozen=True)
class PrivacyMap:
    """From a mechanism's own privacy parameters (ε, δ per its ``privacy_unit``) to the dataset's unit.

    ``account``: the ledger currency (:data:`ACCOUNTS`). ``rule`` (:data:`RULES`):
    - ``per_object``: the mechanism already protects one object (all its records); a guarantee for an object is
      also one for each of its records, so ε and δ carry over to either unit.
    - ``group_privacy``: the guarantee is per trajectory record and the pipeline caps an object at
      ``records_per_object`` = k records before the mechanism (bounded contribution), so one object is a group
      of at most k records: (ε, δ) per record gives (kε, k·e^((k−1)ε)·δ) per object (Dwork and Roth 2014,
      Thm 2.2 for δ = 0; Vadhan 2017, Lemma 2.2 with δ). Without a cap (k None) the object-level ε is unbounded.
    - ``not_dp``: a heuristic guarantee (syntactic anonymity, a baseline): no ε in any unit.
    """

    account: str
    rule: str
    records_per_object: int | None = None

    def __post_init__(self) -> None:
        if self.account not in ACCOUNTS or self.rule not in RULES:
            raise ValueError(f"unknown privacy map {self.account!r}/{self.rule!r}")
        if (self.rule == "not_dp") != (self.account == "heuristic"):
            raise ValueError("a heuristic guarantee, and only one, maps as 'not DP'")

    def to_unit(self, epsilon: float | None, delta: float, unit: str) -> Charge:
        """The guarantee (ε, δ in the mechanism's own unit) for the dataset's ``unit``."""
        if unit not in UNITS:
            raise ParameterError(f"unknown unit of protection {unit!r}; one of {', '.join(UNITS)}", "privacy unit")
        if self.rule == "not_dp" or epsilon is None:
            return Charge("heuristic", unit, None, 0.0, "not DP: a heuristic guarantee spends no epsilon")
        if self.rule == "per_object" or unit == "record":
            return Charge(self.account, unit, epsilon, delta, f"the mechanism's own epsilon ({self.rule}, {unit})")
        k = self.records_per_object
        if k is None:
            return Charge(self.account, unit, math.inf, delta,
                          "group privacy over an unbounded number of records per object: unbounded")
        return Charge(self.account, unit, k * epsilon, k * math.exp((k - 1) * epsilon) * delta if delta else 0.0,
                      f"group privacy: {k} records per object x epsilon {epsilon:g}")

    def to_dict(self) -> dict:
        return asdict(self)


NOT_DP = PrivacyMap("heuristic", "not_dp")


@dataclass(frozen=True)
class EmpiricalBound:
    """The audited empirical lower bound on ε of a claim that is not DP, as the bench measured it on the claim's
    own scenario (``python -m bench.dp_audit``; StatDP/DP-Sniper style, :mod:`audits.dp_audit`): a figure of that
    simulated scenario, never computed on a release's data, so it may be shown wherever the guarantee is.

    mechanism, neighbours: the bench row (``bench/dp_audit/<mechanism>.json``) it comes from; claim_epsilon: the
    ε the mechanism was configured for there; lower_bound: the 95 % Clopper-Pearson bound measured;
    unbounded: the statistic separated the two datasets in every run, so the true ε is infinite and
    ``lower_bound`` is only the most those runs can show; scenario: the pair and configuration in words.
    """

    mechanism: str
    neighbours: str
    scenario: str
    claim_epsilon: float
    lower_bound: float
    unbounded: bool
    selection_runs: int
    runs: int

    def words(self) -> str:
        figure = (f"unbounded (the two datasets were told apart in every run; {self.lower_bound:.2f} is the most "
                  f"{self.runs:,} runs can show)" if self.unbounded else f"{self.lower_bound:.2f}")
        return (f"Audited empirical lower bound on epsilon: {figure}, against a claimed epsilon of "
                f"{self.claim_epsilon:g}, with 95% confidence from {self.selection_runs:,} + {self.runs:,} simulated "
                f"runs per dataset. A bench figure for its own scenario ({self.scenario}), not computed on this "
                f"release's data: python -m bench.dp_audit --only {self.mechanism} (bench/DP_AUDIT_RESULTS.md). "
                "A lower bound: a stronger attack may find more.")


OBJECT_IDENTIFIER_CAVEAT = (
    "The unit is the object identifier of the input: one person or vehicle that appears under two identifiers is "
    "protected as two objects (epsilon twice). Each partition of the pipeline must hold whole objects (the flow "
    "reads partitions as lists of objects).")
POPULATION_FACTS_CAVEAT = (
    "Differential privacy bounds what the release reveals about one object, not population-level facts: hot "
    "spots, frequent moves and the fleet's operating hours are meant to survive and may be sensitive for a group.")
GATE_DECISION_CAVEAT = (
    "Whether this release was published is itself computed from the raw data, outside the epsilon above: the "
    "audit gate attacks the candidate with the raw data and publishes it only if every attack's risk, the upper "
    "end of its 95% interval by default, is at or under the policy's threshold. The decision reveals one bit "
    "per run (published or blocked) and which attacks could not measure the release, and in the worst case that "
    "bit can turn on one person's data when a risk sits at its threshold; every run is charged in full, "
    "published or not, so running the release again to get a pass spends the budget again.")
"""The caveat every release's guarantee carries about the gate's own decision (docs/design.md, "Audits and the
gate", why a caveat rather than a noisy, charged decision)."""


@dataclass(frozen=True)
class Guarantee:
    """What a release protects, against whom, and with which caveats.

    model: the formal model ("epsilon-DP", "epsilon-LDP", "(k,delta)-anonymity", "heuristic", ...).
    privacy_unit: what one protected individual contributes ("one trajectory record", "one object").
    neighbouring: the neighbouring relation of the DP definition, if any ("add/remove one record").
    epsilon / delta: the budget this release spends (None for non-DP models).
    proven: whether the guarantee is a theorem (True) or a heuristic claim (False).
    statement: the guarantee in plain words.
    privacy_map: how ε and δ become ε and δ for the dataset's unit of protection (the ledger charges that).
    caveats: what the guarantee does not cover (the mechanism's own; stated with :data:`GATE_DECISION_CAVEAT` after
    them, which every release carries).
    empirical_bound: for a claim that is not DP, its audited empirical lower bound on ε (None: not audited).
    """

    model: str
    privacy_unit: str
    statement: str
    proven: bool
    privacy_map: PrivacyMap
    neighbouring: str | None = None
    epsilon: float | None = None
    delta: float = 0.0
    caveats: tuple[str, ...] = field(default_factory=tuple)
    empirical_bound: EmpiricalBound | None = None

    @classmethod
    def heuristic(cls, model: str, privacy_unit: str, statement: str, caveats: Iterable[str] = (), *,
                  neighbouring: str | None = None, empirical_bound: EmpiricalBound | None = None) -> Guarantee:
        """A claim that is not DP (syntactic anonymity, unlinkability, a baseline): not proven, no ε, charged
        nothing (:data:`NOT_DP`)."""
        return cls(model=model, privacy_unit=privacy_unit, statement=statement, proven=False, privacy_map=NOT_DP,
                   neighbouring=neighbouring, caveats=tuple(caveats), empirical_bound=empirical_bound)

    @classmethod
    def per_object(cls, epsilon: float, how: str, caveats: Iterable[str]) -> Guarantee:
        """ε-DP per object of a synthetic release: neighbouring inputs differ by one object with all its
        trajectory records, the unit the ledger charges as it is (:class:`PrivacyMap` ``per_object``). The
        statement is that definition followed by ``how`` the mechanism meets it; the caveats are framed by the two
        every per-object synthesizer states: what an object is (first) and what DP does not hide (last)."""
        statement = (
            f"epsilon-differential privacy with epsilon = {epsilon:g} for each object (a taxi, a person: all of its "
            "trajectory records together): for any two input databases that differ by adding or removing one "
            "object with all its records, the probability of every possible released set of synthetic "
            f"trajectories changes by at most a factor exp({epsilon:g}). {how}")
        return cls(model="epsilon-DP", privacy_unit="one object", statement=statement, proven=True,
                   privacy_map=PrivacyMap("epsilon-DP", "per_object"),
                   neighbouring="add/remove one object with all its trajectory records", epsilon=epsilon,
                   caveats=(OBJECT_IDENTIFIER_CAVEAT, *caveats, POPULATION_FACTS_CAVEAT))

    @classmethod
    def per_record(cls, epsilon: float, statement: str, caveats: Iterable[str], records_per_object: int | None, *,
                   model: str = "epsilon-DP", proven: bool = True,
                   neighbouring: str = "add/remove one trajectory record") -> Guarantee:
        """ε-DP per trajectory record, which the ledger maps to the object by group privacy over the at most
        ``records_per_object`` records the pipeline keeps of it (:class:`PrivacyMap`, Dwork and Roth 2014,
        Thm 2.2; unbounded without a cap)."""
        return cls(model=model, privacy_unit="one trajectory record", statement=statement, proven=proven,
                   privacy_map=PrivacyMap("epsilon-DP", "group_privacy", records_per_object),
                   neighbouring=neighbouring, epsilon=epsilon, caveats=tuple(caveats))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["caveats"] = list(self.stated_caveats)
        return d

    @property
    def stated_caveats(self) -> tuple[str, ...]:
        """The caveats as the release states them: the mechanism's, then the gate decision's."""
        return (*self.caveats, GATE_DECISION_CAVEAT)

    def charge(self, unit: str) -> Charge:
        """This guarantee in the dataset's ``unit`` (:data:`UNITS`)."""
        return self.privacy_map.to_unit(self.epsilon, self.delta, unit)

    def plain_text(self) -> str:
        lines = [self.statement]
        if self.empirical_bound is not None:
            lines.append(self.empirical_bound.words())
        lines += [f"Caveat: {c}" for c in self.stated_caveats]
        return "\n".join(lines)


def empirical_bound_words(guarantee: dict) -> str | None:
    """The audited empirical bound of a stored guarantee (:meth:`Guarantee.to_dict`) in words, for the review and
    ``trajpub release show``; for a Pufferfish claim without one, that it was not audited; else None."""
    if bound := guarantee.get("empirical_bound"):
        return EmpiricalBound(**bound).words()
    if (guarantee.get("privacy_map") or {}).get("account") == "Pufferfish":
        return "Audited empirical lower bound on epsilon: not audited for this configuration."
    return None


def object_level_caveat(epsilon: float, max_records_per_object: int | None) -> str:
    """The caveat of a mechanism that is epsilon-DP per trajectory record: an object with several records is
    protected at (records per object) x epsilon by group privacy (Dwork and Roth 2014, Thm 2.2)."""
    head = ("One object (a person, a vehicle) that contributes several trajectory records is protected only at "
            "(max records per object) x epsilon by group privacy")
    if max_records_per_object is None:
        return head + "; the number of records per object is not capped here, so the object-level guarantee is unbounded."
    return (head + f": with at most {max_records_per_object} records per object (a cap the pipeline enforces before "
            f"this mechanism), that is epsilon = {max_records_per_object * epsilon:g} per object.")
