"""The server/client seam: what the server sends to the clients (plans) and what comes back (answers).

This module is the *only* thing the server side (``server``, ``triehh``, ``sfp``) and the client side
(``client``, ``population``) share. A plan carries public protocol state: the round, the candidate
fragments, the noise factor, and which clients are asked what, named by opaque client ids 0..N−1. An answer
carries only aggregated randomised counts per candidate (FASTPub), per trie edge (TrieHH) or per sketch cell
(SFP); never a trajectory, a cell, or anything about one client.

Client ids. The server knows only N (``ClientPopulation.size()``) and draws the participants itself, as Alg. 2
line 15 does ("draw M·N clients from 𝒩, not drawn before"); the choice uses only N and the server's own
generator, so it is independent of the data (a unit test checks it). A population lays its clients out in
partitions of consecutive ids and hands each partition the restriction of the plan to its id range
(:meth:`RoundPlan.restrict`, :func:`split_plan`), with ids made local. The *clients'* random coins must come
from a generator the server never sees: a server that knew them could undo the randomised response.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np

from trajpub.errors import InputError

_LDP_SLACK = 1e-9


def _sorted_ids(participants: np.ndarray, where: str) -> np.ndarray:
    p = np.asarray(participants, dtype=np.int64)
    if p.ndim != 1 or (len(p) and (p[0] < 0 or np.any(np.diff(p) <= 0))):
        raise InputError("participants must be strictly increasing non-negative client ids", where)
    return p


class _Restrictable:
    """Plans whose clients are named by sorted ids; ``restrict`` keeps the ids in [start, stop), made local."""

    participants: np.ndarray
    _aligned: tuple[str, ...] = ()

    def restrict(self, start: int, stop: int):
        lo, hi = np.searchsorted(self.participants, [start, stop], side="left")
        changes = {"participants": self.participants[lo:hi] - start}
        for name in self._aligned:
            changes[name] = getattr(self, name)[lo:hi]
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, eq=False)
class RoundPlan(_Restrictable):
    """One FASTPub round as the clients see it (Alg. 2 lines 13–20).

    round: l, the fragment length of this round.
    candidates: the (G, l) candidate fragments C_l, in the server's shuffled order A (docs/design.md, FASTPub).
    n: candidates per client, min(C, G); eta: η = 1/(1+e^{ε/n}); epsilon: the budget a client spends here.
    participants: sorted client ids asked in this round; first_candidate[i] is where client participants[i]'s
        cyclic block starts: it answers candidates[(first_candidate[i] + j) mod G] for j < n (docs/design.md, FASTPub).
    """

    round: int
    candidates: np.ndarray
    n: int
    eta: float
    epsilon: float
    participants: np.ndarray
    first_candidate: np.ndarray
    n_locations: int
    _aligned = ("first_candidate",)

    def __post_init__(self) -> None:
        where = f"fastpub round {self.round} plan"
        object.__setattr__(self, "participants", _sorted_ids(self.participants, where))
        object.__setattr__(self, "first_candidate", np.asarray(self.first_candidate, dtype=np.int64))
        cands = np.asarray(self.candidates, dtype=np.int64)
        object.__setattr__(self, "candidates", cands)
        g = len(cands)
        if cands.ndim != 2 or cands.shape[1] != self.round or g < 1:
            raise InputError(f"candidates must be a non-empty (G, {self.round}) array", where)
        if not 1 <= self.n <= g:
            raise InputError(f"n = {self.n} must lie in 1..{g} (distinct candidates per client)", where)
        if len(self.first_candidate) != len(self.participants):
            raise InputError("one first_candidate per participant", where)
        if len(self.first_candidate) and (self.first_candidate.min() < 0 or self.first_candidate.max() >= g):
            raise InputError("first_candidate out of range", where)
        # A client refuses a plan that would spend more than its budget (Thm 2: n·ln((1−η)/η) ≤ ε).
        if not 0 <= self.eta < 0.5:
            raise InputError(f"eta must lie in [0, 0.5), got {self.eta}", where)
        if self.eta == 0:
            if not math.isinf(self.epsilon):
                raise InputError("eta = 0 gives no privacy; only the noise-free test hook may use it", where)
        elif self.n * math.log((1 - self.eta) / self.eta) > self.epsilon * (1 + _LDP_SLACK):
            raise InputError(f"n·ln((1−η)/η) exceeds epsilon = {self.epsilon}", where)

    @property
    def n_candidates(self) -> int:
        return len(self.candidates)

    def block(self, first: int) -> np.ndarray:
        """Indices into ``candidates`` of the cyclic block starting at ``first``."""
        return (first + np.arange(self.n)) % self.n_candidates


@dataclass(frozen=True, eq=False)
class RoundAnswers:
    """Aggregated randomised answers of some clients to one :class:`RoundPlan` (Alg. 2 line 20).

    asked[g]: how many of these clients were asked about candidate g (m_f); yes[g]: how many answered "1"
    after randomised response (Y_f); n_clients: how many clients answered. Counts only.
    """

    round: int
    asked: np.ndarray
    yes: np.ndarray
    n_clients: int

    def __post_init__(self) -> None:
        asked = np.asarray(self.asked, dtype=np.int64)
        yes = np.asarray(self.yes, dtype=np.int64)
        if asked.shape != yes.shape or asked.ndim != 1 or np.any(yes < 0) or np.any(yes > asked):
            raise InputError("answers need 0 <= yes <= asked, one entry per candidate",
                             f"fastpub round {self.round} answers")
        object.__setattr__(self, "asked", asked)
        object.__setattr__(self, "yes", yes)

    @classmethod
    def combine(cls, answers: Sequence[RoundAnswers]) -> RoundAnswers:
        """The sum of partitions' answers to the same round."""
        _same_round(answers)
        return cls(round=answers[0].round, asked=sum(a.asked for a in answers), yes=sum(a.yes for a in answers),
                   n_clients=sum(a.n_clients for a in answers))


@dataclass(frozen=True, eq=False)
class TriePlan(_Restrictable):
    """One TrieHH round (baseline, the authors' code): vote for (prefix, next location) if t[:r−1] is a trie path.

    prefixes: (P, r−1) the trie nodes at depth r−1 (for r = 1 one empty prefix); participants: sorted ids.
    """

    round: int
    prefixes: np.ndarray
    participants: np.ndarray
    n_locations: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "participants", _sorted_ids(self.participants, f"triehh round {self.round}"))
        prefixes = np.asarray(self.prefixes, dtype=np.int64)
        if prefixes.ndim != 2 or prefixes.shape[1] != self.round - 1:
            raise InputError(f"prefixes must be a (P, {self.round - 1}) array", f"triehh round {self.round}")
        object.__setattr__(self, "prefixes", prefixes)


@dataclass(frozen=True, eq=False)
class TrieVotes:
    """Vote counts of some clients: votes[p, a] clients have trajectories starting prefixes[p] → a.

    No noise: TrieHH's privacy comes from sampling and thresholding on the server, not from the clients.
    """

    round: int
    votes: np.ndarray
    n_clients: int

    @classmethod
    def combine(cls, answers: Sequence[TrieVotes]) -> TrieVotes:
        _same_round(answers)
        return cls(round=answers[0].round, votes=sum(a.votes for a in answers),
                   n_clients=sum(a.n_clients for a in answers))


@dataclass(frozen=True, eq=False)
class SfpPlan(_Restrictable):
    """SFP's single round (baseline, the authors' code): every participant reports two count-mean sketch rows.

    trim_length: T (even); rows, columns: sketch shape; word_buckets: the word-hash buckets prefixing a piece;
    word_epsilon, piece_epsilon: ε_A and ε_B; hash_seed: selects the public hash family.
    """

    participants: np.ndarray
    trim_length: int
    n_locations: int
    rows: int
    columns: int
    word_buckets: int
    word_epsilon: float
    piece_epsilon: float
    hash_seed: int
    round: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "participants", _sorted_ids(self.participants, "sfp plan"))

    @property
    def n_positions(self) -> int:
        return self.trim_length // 2


@dataclass(frozen=True, eq=False)
class SfpSketches:
    """Aggregated randomised sketch rows: ones[s, j, c] = number of reported +1 at row j, column c of sketch s.

    Sketch 0 is CMS-A (words); sketch 1 + p is the CMS-B of puzzle position 2p. clients[s, j] counts the clients
    that reported row j of sketch s.
    """

    ones: np.ndarray
    clients: np.ndarray
    n_clients: int
    round: int = 1

    @classmethod
    def combine(cls, answers: Sequence[SfpSketches]) -> SfpSketches:
        return cls(ones=sum(a.ones for a in answers), clients=sum(a.clients for a in answers),
                   n_clients=sum(a.n_clients for a in answers))


Plan = RoundPlan | TriePlan | SfpPlan
Answers = RoundAnswers | TrieVotes | SfpSketches
A = TypeVar("A", RoundAnswers, TrieVotes, SfpSketches)


@runtime_checkable
class ClientPopulation(Protocol):
    """Whatever holds the clients: in memory (:class:`~mechanisms.fastpub.population.InMemoryPopulation`),
    on Dask workers (the integrator's), or real devices. The server talks to it only through these two calls.
    """

    def size(self) -> int:
        """N, the number of clients (one trajectory each)."""
        ...

    def respond(self, plan: Plan) -> Answers:
        """Every participant of ``plan`` answers; the population returns the sum of the answers."""
        ...


def _same_round(answers: Sequence) -> None:
    if not answers:
        raise InputError("nothing to combine", "fastpub answers")
    if len({a.round for a in answers}) != 1:
        raise InputError("answers of different rounds cannot be combined", "fastpub answers")


def combine_answers(answers: Sequence[A]) -> A:
    """Sum the answers of partitions to one plan (all of one type)."""
    kinds = {type(a) for a in answers}
    if len(kinds) != 1:
        raise InputError(f"cannot combine answers of types {sorted(k.__name__ for k in kinds)}", "fastpub")
    return kinds.pop().combine(list(answers))


def split_plan(plan: Plan, boundaries: Sequence[int]) -> list[Plan]:
    """The restrictions of ``plan`` to the partitions [boundaries[i], boundaries[i+1]) of client ids."""
    return [plan.restrict(int(a), int(b)) for a, b in itertools.pairwise(boundaries)]
