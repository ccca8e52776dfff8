"""Members against controls: how every attack on a release without owners measures disclosure, not resemblance
(docs/design.md, "Control objects").

A synthetic record belongs to nobody, so "the adversary linked it to the right person" has no meaning; what a
release can disclose is that it carries more of the objects it was made from (the *members*) than of objects of
the same population it never saw (the *controls*). Anonymeter's protocol (Giomi, Boenisch, Wehmeyer, Tasnádi,
"A Unified Framework for Quantifying Privacy Risk in Synthetic Data", PoPETs 2023(2), Sec. 4): a share of the
objects, drawn at random by object, is held out of the mechanism's input; every attack scores each member and
each control by the same rule, and the risk is the members' success beyond the controls',
``(members - controls) / (1 - controls)``. A release that learns only the population scores members and controls
alike (the split is random, so they are exchangeable), whatever its resemblance to the fleet; a release that
copies scores its members higher.

Objects, not records, are the unit: each member and each control contributes one score, so the two samples are
independent draws of the random split and the intervals below are honest (records of one object, or records that
all resemble one busy object, are not independent; a record-level share between two unrelated halves of 382 San
Francisco cabs ranged 0.13-0.52 over ten splits).

:class:`MemberControl` holds one comparison: a difference of two proportions (Newcombe's hybrid score interval,
:func:`audits.stats.newcombe_interval`) or an AUC of a score (DeLong's interval, :func:`audits.stats.auc_interval`;
advantage ``2 AUC - 1``, Yeom et al., CSF 2018). :class:`ControlPolicy` is the gate policy's part: the share held
out and when a comparison is too uncertain to say anything (:class:`TooFewObjects`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from audits.attack import NotApplicable
from audits.stats import auc_interval, baseline_corrected_risk, newcombe_interval, wilson_interval
from trajpub.errors import InputError, ParameterError

PROTOCOL = "held_out"
"""The one protocol: controls are held out of the mechanism's input, so the published release never saw them."""

MEMBER_COLUMN = "member"
TOO_FEW = "too few objects to measure"
SATURATED = "saturated"
UNMEASURED = (TOO_FEW, SATURATED)
"""How every :class:`TooFewObjects` reason begins: too few objects, or a saturated attack (the controls link
almost as often as they can, so ``1 - controls`` leaves nothing to measure however many objects there are)."""


class TooFewObjects(NotApplicable):
    """The comparison's interval cannot say anything: members or controls are too few ("too few objects to
    measure"), or the attack is saturated ("saturated": nearly every control links too, and the risk's interval is
    the difference's divided by ``1 - controls``, near 0); the review shows which and why, not a number; the
    policy's ``when_not_applicable`` rules on it (block unless it says pass)."""


@dataclass(frozen=True)
class MemberControl:
    """One attack's comparison of members with controls, with everything derived from the two samples.

    ``statistic``: ``"rate"`` (the share of members and of controls the attack succeeds on) or ``"auc"`` (the
    probability that a random member scores as more exposed than a random control, ties 1/2).
    ``member_value``, ``control_value``: the two rates, or the AUC and 1/2 (its value when membership does not
    matter). ``member_ci``: the Wilson interval of the member rate, or DeLong's of the AUC. ``difference_ci``:
    Newcombe's interval of ``member - control``, or ``2 x`` DeLong's minus 1 (the advantage's).
    ``risk = max(0, (member - control) / (1 - control))`` (``2 AUC - 1`` for the AUC), and ``risk_ci`` the same
    map of ``difference_ci`` clipped to [0, 1]: the control rate in the denominator is taken as known, as
    Anonymeter's ``residual_success`` does (the numerator carries the uncertainty that matters near 0).
    """

    statistic: Literal["rate", "auc"]
    n_members: int
    n_controls: int
    member_value: float
    control_value: float
    member_ci: tuple[float, float]
    difference_ci: tuple[float, float]
    risk: float
    risk_ci: tuple[float, float]
    confidence: float
    method: str

    @classmethod
    def rates(cls, member_successes: float, n_members: int, control_successes: float, n_controls: int,
              confidence: float = 0.95) -> MemberControl:
        """The attack succeeded on ``member_successes`` of ``n_members`` members and ``control_successes`` of
        ``n_controls`` controls."""
        m, c = member_successes / n_members, control_successes / n_controls
        low, high = newcombe_interval(member_successes, n_members, control_successes, n_controls, confidence)
        scale = 1.0 - c
        risk_ci = (0.0, 1.0) if scale == 0 else (_unit(low / scale), _unit(high / scale))
        return cls("rate", n_members, n_controls, m, c, wilson_interval(member_successes, n_members, confidence),
                   (low, high), baseline_corrected_risk(m, c), risk_ci, confidence,
                   "Newcombe's hybrid score interval of the difference of two proportions (1998, method 10)")

    @classmethod
    def scores(cls, members: np.ndarray, controls: np.ndarray, confidence: float = 0.95) -> MemberControl:
        """``members`` and ``controls``: one score per object, higher = the attack thinks it more likely a member."""
        auc, low, high = auc_interval(members, controls, confidence)
        return cls("auc", len(members), len(controls), auc, 0.5, (low, high), (2 * low - 1, 2 * high - 1),
                   max(0.0, 2 * auc - 1), (_unit(2 * low - 1), _unit(2 * high - 1)), confidence,
                   "DeLong's interval of the AUC (1988); advantage 2 AUC - 1")

    @property
    def baseline(self) -> float:
        return self.control_value

    @property
    def risk_ci_width(self) -> float:
        """The width of the risk's interval before it is clipped to [0, 1] (clipping would hide uncertainty
        below 0): the difference's interval over ``1 - control`` (infinite when every control succeeds), or the
        advantage's."""
        low, high = self.difference_ci
        if self.statistic == "auc":
            return high - low
        return math.inf if self.control_value == 1 else (high - low) / (1 - self.control_value)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("member_ci", "difference_ci", "risk_ci"):
            out[key] = list(out[key])
        out["protocol"] = PROTOCOL
        return out


@dataclass(frozen=True)
class ControlPolicy:
    """The gate policy's control objects (``controls:`` in its YAML).

    share: the share of objects held out of a synthetic release's input, drawn at random by object from fresh
        entropy at every release (the spec's seed in test mode only); the published release is made from the
        others.
    min_objects: fewer members or controls than this and the attack says "too few objects to measure".
    max_risk_ci_width: a risk interval wider than this (:attr:`MemberControl.risk_ci_width`) says the same: the
        comparison cannot tell a release that copies from one that does not.
    """

    share: float = 0.3
    min_objects: int = 30
    max_risk_ci_width: float = 0.4

    def __post_init__(self) -> None:
        where = "gate policy: controls"
        if not (_is_real(self.share) and 0 <= self.share < 1):
            raise ParameterError(f"share must be a number in [0, 1), got {self.share!r}", f"{where}.share")
        if isinstance(self.min_objects, bool) or not isinstance(self.min_objects, int) or self.min_objects < 2:
            raise ParameterError(f"min_objects must be an integer >= 2, got {self.min_objects!r}",
                                 f"{where}.min_objects")
        if not (_is_real(self.max_risk_ci_width) and 0 < self.max_risk_ci_width <= 1):
            raise ParameterError(f"max_risk_ci_width must be a number in (0, 1], got {self.max_risk_ci_width!r}",
                                 f"{where}.max_risk_ci_width")

    @classmethod
    def from_dict(cls, d: Any, where: str = "gate policy: controls") -> ControlPolicy:
        if not isinstance(d, dict):
            raise ParameterError(f"expected a mapping of share, min_objects, max_risk_ci_width, got {d!r}", where)
        unknown = sorted(set(d) - {"share", "min_objects", "max_risk_ci_width"})
        if unknown:
            raise ParameterError(f"unknown key(s) {', '.join(unknown)}; allowed: max_risk_ci_width, min_objects, "
                                 "share", where)
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def unmeasurable(self, comparison: MemberControl, max_risk: float | None = None,
                     upper_bound: bool = False) -> str | None:
        """Why ``comparison`` is too uncertain to gate on, or None: fewer members or controls than
        ``min_objects``; or a risk interval wider than ``max_risk_ci_width``, or, for a policy that decides on the
        upper bound (``upper_bound``), wider than the attack's ceiling ``max_risk`` itself: the interval lies in
        [0, 1], so one wider than the ceiling ends above it and can never show a pass, only a block. Either
        width is measured unless the interval lies wholly above ``max_risk``: a block measured, however wide."""
        fewest = min(comparison.n_members, comparison.n_controls)
        if fewest < self.min_objects:
            return (f"{TOO_FEW}: {comparison.n_members} members and {comparison.n_controls} "
                    f"controls, the policy needs at least {self.min_objects} of each")
        above = max_risk is not None and comparison.risk_ci[0] > max_risk
        low, high = comparison.risk_ci
        if upper_bound and max_risk is not None and high - low > max_risk and not above:
            return (f"{_why_wide(comparison, max_risk)}: the risk's {comparison.confidence:.0%} interval "
                    f"[{low:.2f}, {high:.2f}] is wider than the attack's ceiling {max_risk:g}, so it cannot show a "
                    f"pass ({comparison.n_members} members, {comparison.n_controls} controls)")
        if comparison.risk_ci_width > self.max_risk_ci_width and not above:
            return (f"{_why_wide(comparison, self.max_risk_ci_width)}: the risk's {comparison.confidence:.0%} "
                    f"interval is {comparison.risk_ci_width:.2f} wide, more than the policy's "
                    f"{self.max_risk_ci_width:g} ({comparison.n_members} members, {comparison.n_controls} controls)")
        return None


def _why_wide(comparison: MemberControl, width: float) -> str:
    """Why a rate comparison's risk interval is wider than ``width``: "saturated" when the difference's own
    interval is not (the width comes from dividing it by ``1 - controls``: nearly every control links, as on a
    city-sized fleet whose records resemble everyone's at coarse cells), else "too few objects to measure"."""
    low, high = comparison.difference_ci
    if comparison.statistic == "rate" and high - low <= width:
        return (f"{SATURATED} ({comparison.control_value:.0%} of the controls link as well, so 1 - controls = "
                f"{1 - comparison.control_value:.2f} leaves nothing to measure; not too few objects)")
    return TOO_FEW


def members_and_controls(raw: pd.DataFrame, where: str) -> tuple[pd.Index, pd.Index]:
    """The member and the control objects (``object_id`` as str) of a raw frame with a boolean ``member`` column
    constant per object; refuses a frame without both."""
    if MEMBER_COLUMN not in raw.columns:
        raise InputError("missing column member: the audit needs members and held-out controls", where)
    flags = raw.groupby(raw["object_id"].astype(str))[MEMBER_COLUMN].agg(["min", "max"])
    if (flags["min"] != flags["max"]).any():
        raise InputError("the member column must be constant per object", where)
    is_member = flags["max"].astype(bool).to_numpy()
    members, controls = flags.index[is_member], flags.index[~is_member]
    if len(members) == 0 or len(controls) == 0:
        raise TooFewObjects(f"{TOO_FEW}: {len(members)} members and {len(controls)} controls",
                            where)
    return members, controls


def hold_out(objects: np.ndarray, share: float, rng: np.random.Generator) -> np.ndarray:
    """The control objects: ``round(share x n)`` of ``objects`` drawn uniformly without replacement by ``rng``
    (fresh entropy outside test mode), sorted. Splitting by object keeps every record of a control out."""
    objects = np.unique(np.asarray(objects))
    n = round(share * len(objects))
    return np.sort(rng.choice(objects, n, replace=False)) if n else objects[:0]


def _unit(value: float) -> float:
    return min(1.0, max(0.0, value))


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
