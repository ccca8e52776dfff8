"""An in-memory :class:`~mechanisms.fastpub.protocol.ClientPopulation` for notebooks, tests and benches.

It holds the clients' trajectories as CSR (optionally distinct trajectories with multiplicities, docs/design.md,
FASTPub),
cuts them into partitions of consecutive client ids, and answers a plan by calling the client functions of
:mod:`mechanisms.fastpub.client` on each partition with that partition's own generator. A distributed
population does the same on workers: split the plan with :func:`~mechanisms.fastpub.protocol.split_plan`,
call :func:`~mechanisms.fastpub.client.respond_partition` per partition, and sum with
:func:`~mechanisms.fastpub.protocol.combine_answers`.
"""

from __future__ import annotations

import numpy as np

from mechanisms.fastpub.client import respond_partition, respond_partition_per_client
from mechanisms.fastpub.fragments import check_csr
from mechanisms.fastpub.protocol import Answers, Plan, RoundPlan, combine_answers, split_plan
from trajpub.errors import InputError


class InMemoryPopulation:
    """N clients held in memory; the server sees only :meth:`size` and the answers of :meth:`respond`.

    offsets, cells: CSR trajectories over 0..n_locations−1. multiplicity: optional copies per trajectory (each
    copy is a separate client, as the paper's ×100 MSNBC replication). rng: the *clients'* generator (for
    their randomised responses and SFP's random choices); it must not be the server's. per_client: answer
    FASTPub rounds with the per-client reference path instead of the exact aggregated simulation.
    trajectories_per_partition: how many (distinct) trajectories one partition holds.
    """

    def __init__(self, offsets: np.ndarray, cells: np.ndarray, n_locations: int, rng: np.random.Generator,
                 multiplicity: np.ndarray | None = None, *, per_client: bool = False,
                 trajectories_per_partition: int = 50_000):
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self._cells = np.asarray(cells, dtype=np.int64)
        check_csr(self._offsets, self._cells, n_locations)
        n_traj = len(self._offsets) - 1
        if multiplicity is None:
            self._mult = None
            weights = np.ones(n_traj, dtype=np.int64)
        else:
            self._mult = np.asarray(multiplicity, dtype=np.int64)
            if self._mult.shape != (n_traj,) or np.any(self._mult < 1):
                raise InputError("one multiplicity >= 1 per trajectory", "fastpub population")
            weights = self._mult
        self._rng = rng
        self._per_client = per_client
        self._edges = np.r_[np.arange(0, n_traj, max(1, trajectories_per_partition)), n_traj]
        client_ends = np.concatenate(([0], np.cumsum(weights)))
        self._boundaries = client_ends[self._edges]
        self.n_locations = n_locations

    def size(self) -> int:
        return int(self._boundaries[-1])

    @property
    def n_partitions(self) -> int:
        return len(self._edges) - 1

    def respond(self, plan: Plan) -> Answers:
        parts = split_plan(plan, self._boundaries)
        rngs = self._rng.spawn(len(parts))
        answers = []
        for i, (part_plan, rng) in enumerate(zip(parts, rngs, strict=True)):
            a, b = self._edges[i], self._edges[i + 1]
            offsets = self._offsets[a:b + 1] - self._offsets[a]
            cells = self._cells[self._offsets[a]:self._offsets[b]]
            mult = None if self._mult is None else self._mult[a:b]
            if self._per_client and isinstance(part_plan, RoundPlan):
                answers.append(respond_partition_per_client(offsets, cells, part_plan, rng, mult))
            else:
                answers.append(respond_partition(offsets, cells, part_plan, rng, mult))
        return combine_answers(answers)
