"""What a run produces: the published fragments, the counting database, and a per-round log.

The *release* is ``published`` (P_{l_max} with the estimated count of each fragment) plus the count-query
answers of :meth:`FastPubResult.answer_count_query` (paper §6.3, eq. 13). The round logs also hold the noisy answers on
candidates that were *not* admitted: they are ε-LDP post-processing like everything else, but they did not
pass the (k, ξ) filter, so they are for analysis (benches, cleaning accuracy), not for publication.
:meth:`FastPubResult.metadata` keeps only counts and parameters (JSON-safe, no seed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from mechanisms.fastpub.params import FastPubParams, theorem4_bound

STATUSES = ("published", "no_candidates", "none_admitted")


class QueryModel(Protocol):
    def query(self, fragment) -> float: ...

    def query_many(self, fragments) -> np.ndarray: ...


@dataclass(frozen=True)
class PublishedFragment:
    """One published fragment: its cells, its estimated support count over all N clients, its round."""

    cells: tuple[int, ...]
    estimated_count: float
    round: int


def _json_number(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True, eq=False)
class RoundLog:
    """One FASTPub round (our per-round log).

    candidates: C_l after cleaning, in the shuffled assignment order; removed: R_l (Markov cleaning);
    n_apriori: |C_l| before cleaning; n, eta, epsilon: per-client candidates, noise factor, budget;
    n_participants: |D_l|; asked, yes: m_f and Y_f per candidate; threshold: S_l per candidate (eq. 17);
    estimate: Ŝ_N(f) per candidate; admission_count: k + N·δ/(1−2η), the estimate a candidate needed (the
    closed form of S_l); admitted: mask of P_l; participants: the client ids of D_l (only when the
    server was asked to record them: the budget ledger of tests).
    """

    round: int
    n_apriori: int
    removed: np.ndarray
    candidates: np.ndarray
    n: int = 0
    eta: float = math.nan
    epsilon: float = math.nan
    n_participants: int = 0
    asked: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    yes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    threshold: np.ndarray = field(default_factory=lambda: np.zeros(0))
    estimate: np.ndarray = field(default_factory=lambda: np.zeros(0))
    admission_count: np.ndarray = field(default_factory=lambda: np.zeros(0))
    admitted: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    participants: np.ndarray | None = None

    def metadata(self) -> dict:
        asked = self.asked[self.asked > 0]
        return {
            "round": self.round,
            "n_candidates_apriori": int(self.n_apriori),
            "n_removed_by_cleaning": len(self.removed),
            "n_candidates": len(self.candidates),
            "candidates_per_client": int(self.n),
            "eta": _json_number(self.eta),
            "epsilon_per_client": _json_number(self.epsilon),
            "n_participants": int(self.n_participants),
            "queries_per_candidate_min": int(asked.min()) if len(asked) else 0,
            "queries_per_candidate_max": int(asked.max()) if len(asked) else 0,
            "admission_count_min": _json_number(float(self.admission_count.min())) if asked.size else None,
            "admission_count_max": _json_number(float(self.admission_count.max())) if asked.size else None,
            "n_admitted": int(self.admitted.sum()),
        }


@dataclass(frozen=True, eq=False)
class BaselineRound:
    """One round of a baseline: a JSON-safe summary only."""

    info: dict

    def metadata(self) -> dict:
        return dict(self.info)


@dataclass(frozen=True, eq=False)
class FastPubResult:
    """The outcome of :func:`~mechanisms.fastpub.server.run_server`.

    status: "published" (P_{l_max} is not empty), "no_candidates" (C_l was empty at round ``stopped_round``:
    Alg. 2 lines 10–11, nothing published, no later round drew clients) or "none_admitted" (the last round
    admitted nothing: the paper's "inv"). ``published`` is empty unless the status is "published".
    """

    params: FastPubParams
    status: str
    n_clients: int
    n_locations: int
    published: tuple[PublishedFragment, ...]
    rounds: tuple
    queries: QueryModel
    stopped_round: int
    noise_free: bool = False

    @property
    def method(self) -> str:
        return self.params.method

    @property
    def published_fragments(self) -> np.ndarray:
        """P_{l_max} as an (m, l_max) int array."""
        if not self.published:
            return np.empty((0, self.params.l_max), dtype=np.int64)
        return np.array([p.cells for p in self.published], dtype=np.int64)

    def answer_count_query(self, fragment) -> float:
        """Q̃(f): the estimated number of clients whose trajectory holds ``fragment`` (paper §6.3)."""
        return float(self.queries.query(fragment))

    def answer_count_queries(self, fragments) -> np.ndarray:
        return np.asarray(self.queries.query_many(fragments), dtype=float)

    def spent_epsilon(self) -> np.ndarray:
        """The budget ledger per client id (needs ``record_participants``): Σ over a client's bits of ε/n."""
        spent = np.zeros(self.n_clients)
        for log in self.rounds:
            if isinstance(log, RoundLog) and log.n_participants:
                if log.participants is None:
                    raise ValueError("run the server with record_participants=True to get the ledger")
                spent[log.participants] += log.n * (log.epsilon / log.n)
        return spent

    def metadata(self) -> dict:
        """Lineage facts: parameters, status, sizes, per-round counts, the reported bounds. No seed."""
        bound = theorem4_bound(self.params.l_max, self.params.xi)
        out = {
            "mechanism": "fastpub",
            "method": self.method,
            "status": self.status,
            "stopped_round": int(self.stopped_round),
            "params": self.params.to_dict(),
            "n_clients": int(self.n_clients),
            "n_locations": int(self.n_locations),
            "n_published": len(self.published),
            "rounds": [r.metadata() for r in self.rounds],
        }
        if self.method == "fastpub":
            max_n = max((r.n for r in self.rounds if isinstance(r, RoundLog)), default=0)
            out.update(
                epsilon_per_client=None if self.noise_free else float(self.params.epsilon),
                noise_free_test_mode=self.noise_free,
                theorem4_bound_per_fragment=bound,
                theorem4_bound_per_client=max_n * bound,
            )
            sizes = getattr(self.queries, "sizes", None)
            if sizes is not None:
                out["database_sizes"] = {str(k): v for k, v in sizes().items()}
        elif self.method == "sfp":
            out["epsilon_per_client"] = float(self.params.epsilon)
        return out
