"""FASTPub (Wang, Zhu, Wang, Han, IEEE TMC 2022) with the raw data playing the clients on Dask.

The trust boundary is the one of :mod:`mechanisms.fastpub`: the server loop (:func:`mechanisms.fastpub.run_server`)
runs on the driver and sees only round plans and the partitions' aggregated randomised answers; each
partition's clients answer next to their own trajectories on a worker (:func:`respond_partition`) with coins
from a generator the server loop never sees. Clients are the prepared trajectories (taxi-days), so the
guarantee is per trajectory. The product is aggregate: admitted fragments (grid-cell sequences) with estimated
counts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mechanisms import fastpub
from trajpub.candidate import CandidateRelease, Shape
from trajpub.executor import Executor
from trajpub.guarantee import Guarantee
from trajpub.mechanism import Mechanism, PublicInputs
from trajpub.segment import cell_sequences


def _clients(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """On a worker: the partition's clients as CSR cell sequences (off-grid points dropped), and which raw
    trajectory (object, traj) each executor is; trajectories left empty are not clients."""
    keys, offsets, cells = cell_sequences(df)  # every trajectory has at least one point
    inside = cells >= 0
    kept = np.add.reduceat(inside.astype(np.int64), offsets[:-1]) if len(cells) else np.zeros(0, np.int64)
    first = df.drop_duplicates("traj_id").set_index("traj_id").loc[keys, "object_id"].to_numpy().astype(str)
    nonempty = kept > 0
    return (np.r_[0, np.cumsum(kept[nonempty])].astype(np.int64), cells[inside], keys[nonempty],
            first[nonempty])


def _respond(part: tuple, plan, rng: np.random.Generator):
    offsets, cells, _, _ = part
    return fastpub.respond_partition(offsets, cells, plan, rng)


class DaskPopulation:
    """The clients of the prepared partitions; ``respond`` sends each partition its slice of the plan and
    returns only the sum of their randomised answers (:class:`mechanisms.fastpub.ClientPopulation`)."""

    def __init__(self, executor: Executor, parts: list, sizes: list[int], coins: np.random.Generator):
        self.executor, self.parts = executor, parts
        self.bounds = np.r_[0, np.cumsum(sizes)].astype(np.int64)
        self.coins = coins  # the clients' randomness: the server loop never holds it

    def size(self) -> int:
        return int(self.bounds[-1])

    def respond(self, plan):
        plans = fastpub.split_plan(plan, self.bounds)
        answers = self.executor.gather(self.executor.map(_respond, self.parts, plans, self.coins.spawn(len(plans)),
                                                         pure=False))
        return fastpub.combine_answers(answers)


class FastPub(Mechanism):
    """FASTPub or a baseline (``method``: triehh, sfp) as a release mechanism; the product is fragments."""

    name = "fastpub"
    shape = Shape.FRAGMENTS
    Params = fastpub.FastPubParams

    def partitioned(self, executor: Executor, prepared: list, inputs: PublicInputs, params: fastpub.FastPubParams,
                    rng: np.random.Generator) -> CandidateRelease:
        """The server loop on the driver; each partition's clients answer its round plans on their worker
        with coins the server never holds, and only the summed answers come back."""
        grid = inputs.grid
        parts = executor.map(_clients, prepared, pure=False)
        sizes = executor.gather(executor.map(lambda p: len(p[0]) - 1, parts))
        server_rng, coins = rng.spawn(2)
        population = DaskPopulation(executor, parts, sizes, coins)
        result = fastpub.run_server(params, population, grid.n_cells, server_rng, record_participants=True)
        fragments = [(f.cells, f.estimated_count, f.round) for f in result.published]
        table = pd.DataFrame({"fragment_id": np.arange(1, len(fragments) + 1, dtype=np.int64),
                              "cells": [list(c) for c, _, _ in fragments],
                              "estimated_count": [n for _, n, _ in fragments],
                              "round": [r for _, _, r in fragments]})
        centres = [grid.cell_centre(np.asarray(c, dtype=np.int64)) for c in table["cells"]]
        table["lon"] = [list(lon) for lon, _ in centres]
        table["lat"] = [list(lat) for _, lat in centres]
        # the private key of the audit: which clients answered (members) and which never did (the control)
        who = executor.gather(executor.map(lambda p: pd.DataFrame({"source_traj_id": p[2], "object_id": p[3]}), parts))
        clients = pd.concat(who, ignore_index=True)
        answered = np.unique(np.concatenate([log.participants for log in result.rounds
                                             if log.participants is not None] or [np.zeros(0, np.int64)]))
        owners = clients.iloc[answered].assign(traj_id=answered + 1)
        meta = {**result.metadata(), "released_records": len(table), "released_fragments": len(table),
                "clients": population.size(), "clients_answered": len(answered)}
        return CandidateRelease(self.shape, pd.DataFrame(), meta, fragments=table,
                         owners=owners[["traj_id", "object_id", "source_traj_id"]])

    def guarantee(self, params: fastpub.FastPubParams) -> Guarantee:
        """ε-LDP per client trajectory (Wang et al., TMC 2022, Thm 2), or a baseline's weaker claim
        (TrieHH, SFP): :func:`mechanisms.fastpub.guarantee`."""
        return fastpub.guarantee(params)
