"""BASELINE, server side: TrieHH (Zhu, Kairouz, McMahan, Sun, Li, AISTATS 2020) adapted to trajectories.

Not FASTPub: the paper's weak-privacy baseline (§6.1: "we do not require TrieHH to provide the same privacy
preservation level"). Rebuilt from the FASTPub authors' code (github.com/inslab-ji/FASTPub):

* rounds r = 1..R (R = ``triehh_rounds``, default l_max): draw ⌊ρN⌋ clients, independently of other rounds;
* a participant whose first r−1 cells form a trie path votes for (that node, its r-th cell); **no noise**;
* the server adds the children with votes ≥ θ = ⌊ρN⌋·k/N (= ρk) and stops when none is added;
* output: every root-to-leaf path cut into l_max-windows; DB: each accepted node's estimate v·N/⌊ρN⌋ is
  added to every suffix of its path; count queries use FASTPub's Markov fallback on that DB.

The server imports only the protocol; the clients' side is ``client._triehh_votes``.
"""

from __future__ import annotations

import numpy as np

from mechanisms.fastpub.database import CountingDatabase
from mechanisms.fastpub.fragments import check_key_space, encode
from mechanisms.fastpub.params import FastPubParams
from mechanisms.fastpub.protocol import ClientPopulation, TriePlan, TrieVotes
from mechanisms.fastpub.result import BaselineRound, FastPubResult, PublishedFragment
from mechanisms.fastpub.sampling import sample_clients
from trajpub.errors import InputError


def run_triehh(params: FastPubParams, population: ClientPopulation, n_locations: int,
               rng: np.random.Generator) -> FastPubResult:
    n_clients = int(population.size())
    per_round = params.participants_per_round(n_clients)
    if per_round < 1:
        raise InputError(f"floor(rho * N) = 0 clients per round with N = {n_clients}", "fastpub.rho")
    depth_max = params.rounds
    check_key_space(n_locations, max(depth_max, params.l_max))
    theta = per_round * params.k / n_clients
    scale = n_clients / per_round
    db = CountingDatabase(n_locations, n_clients, params.k)
    levels = [np.empty((1, 0), dtype=np.int64)]
    logs = []
    for r in range(1, depth_max + 1):
        prefixes = levels[-1]
        ids = sample_clients(rng, n_clients, per_round)
        answers = population.respond(TriePlan(round=r, prefixes=prefixes, participants=ids,
                                              n_locations=n_locations))
        if not isinstance(answers, TrieVotes) or answers.votes.shape != (len(prefixes), n_locations):
            raise InputError("the population answered another plan", f"triehh round {r}")
        node, loc = np.nonzero(answers.votes >= theta)
        logs.append(BaselineRound({"round": r, "n_prefixes": len(prefixes), "n_participants": per_round,
                                   "threshold": float(theta), "n_added": len(node)}))
        if len(node) == 0:
            break
        children = np.concatenate([prefixes[node], loc[:, None]], axis=1)
        estimate = answers.votes[node, loc] * scale
        for s in range(r):
            db.add(children[:, s:], estimate)
        levels.append(children[np.argsort(encode(children, n_locations))])

    paths = _leaf_paths(levels, n_locations)
    windows = _windows(paths, params.l_max, n_locations)
    values = db.query_many(windows)
    published = tuple(PublishedFragment(tuple(int(a) for a in f), float(v), params.l_max)
                      for f, v in zip(windows, values, strict=True))
    status = "published" if published else "none_admitted"
    return FastPubResult(params=params, status=status, n_clients=n_clients, n_locations=n_locations,
                         published=published, rounds=tuple(logs), queries=db, stopped_round=len(logs))


def _leaf_paths(levels: list[np.ndarray], n_locations: int) -> list[np.ndarray]:
    """Nodes with no child: for each depth, the paths not extended at the next depth."""
    leaves = []
    for depth in range(1, len(levels)):
        nodes = levels[depth]
        if depth + 1 < len(levels):
            parents = encode(levels[depth + 1][:, :-1], n_locations)
            nodes = nodes[~np.isin(encode(nodes, n_locations), parents)]
        leaves.append(nodes)
    return leaves


def _windows(paths: list[np.ndarray], length: int, n_locations: int) -> np.ndarray:
    """The distinct ``length``-windows of the given paths, sorted by key."""
    parts = [np.empty((0, length), dtype=np.int64)]
    for p in paths:
        for s in range(p.shape[1] - length + 1):
            parts.append(p[:, s:s + length])
    out = np.concatenate(parts)
    _, first = np.unique(encode(out, n_locations), return_index=True)
    return out[first]
