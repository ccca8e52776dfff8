"""Membership inference against aggregate releases of fragments with counts (attack A8; docs/design.md, The attacks).

Survey Sec. 2.2.1, ref. [52] (Pyrgelis, Troncoso, De Cristofaro, "Knock Knock, Who's There? Membership Inference
on Aggregate Location Data", NDSS 2018): from aggregates alone an adversary who knows a target's locations can
tell whether the target was in the dataset; presence itself can be sensitive. We run it
for aggregate side-products (density or OD tables, the
frequent fragments FASTPub publishes with estimated counts).

The game (the in/out game of [52] and of Yeom et al., "Privacy Risk in Machine Learning", CSF 2018, with a
held-out control as Anonymeter's evaluators use): the auditor splits the objects at random into *members*,
whose data went into the release, and held-out *non-members*, whose data did not (the raw frame's ``member``
column says which; running the mechanism on the members only is the caller's job, see the audit task). The
adversary knows a target's trajectories and the released table and scores how much of the target the table
shows; it wins a round of one member against one non-member when the member scores higher (ties: a coin flip).

The score of an object u (``score="inverse_count"``, the default) is the mean over u's distinct fragments f of
the released lengths of ``1 / max(ĉ(f), 1)`` where ĉ(f) is f's released count, and 0 when f is not released:
a fragment released with a count of about 1 is strong evidence that u is the one who made it, one shared by
thousands is none. ``score="coverage"`` is the share of u's fragments that are released at all. A fragment of u
is a contiguous sub-sequence of the cells of one of u's trajectories (in ``seq`` order, consecutive repeats
collapsed, as :func:`trajpub.segment.cell_sequences` and FASTPub's fragments do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from audits.attack import Attack, AttackParams
from audits.patterns import pattern_codes
from audits.result import AttackResult
from audits.stats import mid_ranks
from trajpub.errors import InputError, ParameterError
from trajpub.params import Scope

NAME = "membership"
SCORES = ("inverse_count", "coverage")

_P = Scope(NAME)


@dataclass(frozen=True)
class MembershipParams(AttackParams):
    """Parameters of :class:`MembershipInference`.

    lengths: the fragment lengths the adversary uses; ``None`` uses every length present in the release.
    score: ``"inverse_count"`` or ``"coverage"`` (see the module docstring).
    max_targets: at most this many members and as many non-members, drawn at random; ``None`` uses them all.
    seed: seed of that draw; ``None`` draws fresh entropy.
    confidence: the confidence level of the reported Wilson interval.
    """

    scope = _P

    lengths: tuple[int, ...] | None = None
    score: str = "inverse_count"
    max_targets: int | None = None
    seed: int | None = None
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.lengths is not None and not (
                isinstance(self.lengths, tuple) and self.lengths
                and all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in self.lengths)):
            raise ParameterError(f"lengths must be None or a non-empty tuple of positive integers, got "
                                 f"{self.lengths!r}", _P.where("lengths"))
        _P.require_choice(self.score, "score", SCORES)
        _P.require_optional_int(self.max_targets, "max_targets", 1)
        self.require_seed_and_confidence()


def release_fragments(release: pd.DataFrame) -> tuple[list[np.ndarray], np.ndarray]:
    """The released fragments as integer cell arrays and their counts.

    Accepts a ``fragment`` column (a tuple, list or array of cells per row; ``cells``, the name of the
    ``staging.candidate_fragments`` column, is accepted too) or, for a density table, a ``cell`` column (a
    fragment of length 1); with a ``count`` (or ``estimated_count``) column either way. Rows with a non-finite
    count are refused. The cells must be ids of the same grid as the raw frame's ``cell`` column.
    """
    count_column = next((c for c in ("count", "estimated_count") if c in release.columns), None)
    if count_column is None:
        raise InputError("missing column(s) count", f"{NAME}: release frame")
    fragment_column = next((c for c in ("fragment", "cells") if c in release.columns), None)
    if fragment_column is not None:
        fragments = [np.asarray(f, dtype=np.int64).ravel() for f in release[fragment_column]]
    elif "cell" in release.columns:
        fragments = [np.asarray([c], dtype=np.int64) for c in release["cell"].to_numpy()]
    else:
        raise InputError("the release needs a fragment column (or a cell column for a density table)",
                         f"{NAME}: release frame")
    counts = release[count_column].to_numpy(dtype=float)
    if not np.isfinite(counts).all():
        raise InputError("column count has non-finite values", f"{NAME}: release frame")
    if any(len(f) == 0 for f in fragments):
        raise InputError("a released fragment is empty", f"{NAME}: release frame")
    return fragments, counts


def membership_scores(raw: pd.DataFrame, release: pd.DataFrame, params: MembershipParams) -> pd.Series:
    """The adversary's score of every raw object (index: ``object_id`` as str), in [0, 1]."""
    fragments, counts = release_fragments(release)
    released_lengths = sorted({len(f) for f in fragments})
    lengths = sorted(set(params.lengths)) if params.lengths is not None else released_lengths
    if not np.issubdtype(raw["cell"].to_numpy().dtype, np.integer):
        raise InputError(f"column cell must hold integers, got {raw['cell'].dtype}", f"{NAME}: raw frame")
    points = raw.sort_values(["traj_id", "seq"], kind="stable")
    traj = points["traj_id"].to_numpy()
    cells = points["cell"].to_numpy().astype(np.int64)
    keep = np.r_[True, (traj[1:] != traj[:-1]) | (cells[1:] != cells[:-1])] if len(traj) else np.zeros(0, bool)
    traj, cells = traj[keep], cells[keep]
    owner = points["object_id"].astype(str).to_numpy()[keep]
    starts = np.flatnonzero(np.r_[True, traj[1:] != traj[:-1]])
    n_raw_seqs = len(starts)
    seq_owner, objects = pd.factorize(owner[starts], sort=True)
    frag_lengths = np.array([len(f) for f in fragments], dtype=np.int64)
    all_cells = np.concatenate([cells, *fragments])
    offsets = np.r_[starts, len(cells), len(cells) + np.cumsum(frag_lengths)]
    windows = pattern_codes(all_cells, offsets, lengths)
    total = np.zeros(len(objects))
    n_fragments = np.zeros(len(objects))
    for seq, code in windows.values():
        from_raw = seq < n_raw_seqs
        released = pd.Series(counts[seq[~from_raw] - n_raw_seqs]).groupby(code[~from_raw]).sum()
        own = pd.DataFrame({"obj": seq_owner[seq[from_raw]], "code": code[from_raw]}).drop_duplicates()
        c = released.reindex(own["code"].to_numpy()).to_numpy()
        value = np.where(np.nan_to_num(c, nan=0.0) > 0, 1.0, 0.0)
        if params.score == "inverse_count":
            value = value / np.maximum(np.nan_to_num(c, nan=1.0), 1.0)
        obj = own["obj"].to_numpy()
        total += np.bincount(obj, weights=value, minlength=len(objects))
        n_fragments += np.bincount(obj, minlength=len(objects))
    score = np.divide(total, n_fragments, out=np.zeros(len(objects)), where=n_fragments > 0)
    return pd.Series(score, index=pd.Index(np.asarray(objects).astype(str), name="object_id"), name="score")


class MembershipInference(Attack[MembershipParams]):
    """Membership inference on an aggregate release (A8): members vs held-out non-members.

    ``raw``: the trajectories of members and non-members, with a boolean ``member`` column constant per object.
    ``release``: ``fragment`` (or ``cell``) and ``count``, computed from the members only.

    Result: ``n_targets`` = the number of (member, non-member) rounds, the smaller group's size (each object
    plays at most once, so the Wilson interval treats independent rounds); ``n_successes`` = that number times
    the probability that a random member outscores a random non-member, ties counting 1/2 (the AUC of the score,
    the Mann-Whitney statistic over all member x non-member pairs: the expected wins of a random pairing).
    Baseline: 1/2, a coin flip; the corrected risk ``2 AUC - 1`` is the membership advantage of Yeom et al.
    """

    @property
    def name(self) -> str:
        return NAME

    @property
    def raw_columns(self) -> tuple[str, ...]:
        return ("object_id", "traj_id", "seq", "cell", "member")

    @property
    def release_columns(self) -> tuple[str, ...]:
        """Checked by :func:`release_fragments` (``fragment``/``cells``/``cell`` with ``count``/``estimated_count``)."""
        return ()

    def _attack(self, raw: pd.DataFrame, release: pd.DataFrame) -> AttackResult:
        p = self.params
        flags = raw.groupby(raw["object_id"].astype(str))["member"].agg(["min", "max"])
        if (flags["min"] != flags["max"]).any():
            raise InputError("the member column must be constant per object", f"{NAME}: raw frame")
        is_member = flags["max"].astype(bool)
        members, others = is_member.index[is_member.to_numpy()], is_member.index[~is_member.to_numpy()]
        if len(members) == 0 or len(others) == 0:
            raise InputError("membership inference needs members (member=True) and held-out non-members "
                             "(member=False) in the raw frame", f"{NAME}: raw frame")
        if p.max_targets is not None:
            rng = np.random.default_rng(p.seed)
            members = _subsample(members, p.max_targets, rng)
            others = _subsample(others, p.max_targets, rng)
        scores = membership_scores(raw, release, p)
        s_in, s_out = scores.reindex(members).to_numpy(), scores.reindex(others).to_numpy()
        auc = _auc(s_in, s_out)
        n_rounds = min(len(s_in), len(s_out))
        fragments, _ = release_fragments(release)
        evidence: dict[str, Any] = {
            "score": p.score,
            "lengths": sorted(set(p.lengths)) if p.lengths is not None else sorted({len(f) for f in fragments}),
            "n_members": len(s_in),
            "n_non_members": len(s_out),
            "n_released_fragments": len(fragments),
            "auc": auc,
            "advantage": 2 * auc - 1,
            "mean_score_members": float(s_in.mean()),
            "mean_score_non_members": float(s_out.mean()),
            "baseline_kind": "coin flip between a member and a non-member",
            "examples": [],
        }
        return AttackResult(attack=NAME, n_targets=n_rounds, n_successes=auc * n_rounds, baseline=0.5,
                            evidence=evidence, confidence=p.confidence)


def _auc(s_in: np.ndarray, s_out: np.ndarray) -> float:
    """P(score of a random member > score of a random non-member) + P(equal) / 2, from mid-ranks."""
    ranks = mid_ranks(np.concatenate([s_in, s_out]))
    u = ranks[:len(s_in)].sum() - len(s_in) * (len(s_in) + 1) / 2
    return float(u / (len(s_in) * len(s_out)))


def _subsample(ids: pd.Index, n: int, rng: np.random.Generator) -> pd.Index:
    return ids if len(ids) <= n else ids[np.sort(rng.choice(len(ids), n, replace=False))]
