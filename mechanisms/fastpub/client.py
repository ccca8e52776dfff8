"""CLIENT side: the code that runs next to the raw trajectories. It returns aggregated randomised counts only.

One partition holds some clients as CSR ``(offsets, cells)`` (one trajectory per client, cells in 0..L−1) and,
optionally, ``multiplicity``: distinct trajectory i then stands for ``multiplicity[i]`` identical clients, and
local client ids 0..Σmultiplicity−1 run through the copies of trajectory 0 first, then of trajectory 1, and so
on. A plan (``protocol``) names the participants by local id; :func:`respond_partition` answers it for all of
them and returns the *sum* of their answers.

Two exact ways to answer a FASTPub round (docs/design.md, FASTPub):

* per client (the reference, :func:`respond_partition_per_client`): every participant runs Algorithm 1
  (:func:`respond`) on its own trajectory with its own coins: n bits, each flipped with probability η.
* aggregated (the fast path, :func:`respond_partition`): given the assignment, the participants asked about
  candidate f split into h_f holders of f and m_f − h_f non-holders; their "yes" count is
  Y_f = Bin(h_f, 1−η) + Bin(m_f − h_f, η), independent across f because each bit is flipped independently.
  Drawing these binomials gives exactly the distribution of the per-client sum, at a cost that does not grow
  with the number of copies of a trajectory. Each h_f counts only whether each asked client's own trajectory
  holds f. (Our choice; the authors' code loops over clients.)

The coins come from ``rng``, which must be the partition's own generator, never derived from the server's.
"""

from __future__ import annotations

import numpy as np

from mechanisms.fastpub.fragments import check_csr, encode, presence
from mechanisms.fastpub.protocol import (
    Answers,
    Plan,
    RoundAnswers,
    RoundPlan,
    SfpPlan,
    SfpSketches,
    TriePlan,
    TrieVotes,
)
from mechanisms.fastpub.sketch import HashFamily, flip_probability, mix, word_buckets
from trajpub import noise
from trajpub.errors import InputError


def respond(trajectory: np.ndarray, eta: float, candidates: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Algorithm 1, RESPOND(t, η, 𝒞, n): one randomised bit per candidate, b' = 𝕀(c is a fragment of t) ⊕ Bern(η).

    Eq. 15: P(b' = 0 | b = 0) = 1 − η and P(b' = 0 | b = 1) = η.
    """
    candidates = np.asarray(candidates, dtype=np.int64)
    t = np.asarray(trajectory, dtype=np.int64)
    length = candidates.shape[1]
    if length > len(t):
        truth = np.zeros(len(candidates), dtype=bool)
    elif length <= 0:
        truth = np.ones(len(candidates), dtype=bool)
    else:
        windows = {w.tobytes() for w in np.lib.stride_tricks.sliding_window_view(t, length)}
        truth = np.array([c.tobytes() in windows for c in candidates], dtype=bool)
    flips = noise.bernoulli(eta, len(truth), rng)
    return (truth ^ flips).astype(np.int8)


def client_trajectories(multiplicity: np.ndarray | None, n_trajectories: int, local_ids: np.ndarray
                        ) -> np.ndarray:
    """The distinct-trajectory index of each local client id."""
    if multiplicity is None:
        total = n_trajectories
        owner = local_ids
    else:
        ends = np.cumsum(np.asarray(multiplicity, dtype=np.int64))
        total = int(ends[-1]) if len(ends) else 0
        owner = np.searchsorted(ends, local_ids, side="right")
    if len(local_ids) and (local_ids[0] < 0 or local_ids[-1] >= total):
        raise InputError(f"a plan names a client outside this partition's {total} clients", "fastpub client")
    return owner


def respond_partition(offsets: np.ndarray, cells: np.ndarray, plan: Plan, rng: np.random.Generator,
                      multiplicity: np.ndarray | None = None) -> Answers:
    """Answer ``plan`` (already restricted to this partition, local ids) for all its participants here.

    The entry point a distributed population calls on each partition (e.g. through ``dask.distributed``'s
    ``client.map``), then sums the results with :func:`~mechanisms.fastpub.protocol.combine_answers`.
    FASTPub rounds use the exact aggregated simulation; TrieHH votes carry no noise and are counted per
    distinct trajectory; SFP draws each client's choices and randomises the sketch counts in aggregate.
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    cells = np.asarray(cells, dtype=np.int64)
    check_csr(offsets, cells, plan.n_locations, "fastpub client partition")
    if isinstance(plan, RoundPlan):
        return _fastpub_aggregated(offsets, cells, plan, rng, multiplicity)
    if isinstance(plan, TriePlan):
        return _triehh_votes(offsets, cells, plan, multiplicity)
    if isinstance(plan, SfpPlan):
        return _sfp_sketches(offsets, cells, plan, rng, multiplicity)
    raise InputError(f"unknown plan type {type(plan).__name__}", "fastpub client")


def _held_pairs(offsets: np.ndarray, cells: np.ndarray, plan: RoundPlan, trajectories: np.ndarray
                ) -> np.ndarray:
    """Sorted keys u·G + g of the pairs (distinct trajectory u among ``trajectories``, candidate g ⊂ t_u)."""
    g_count = plan.n_candidates
    lengths = np.diff(offsets)[trajectories]
    sub_offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    idx = np.repeat(offsets[trajectories] - sub_offsets[:-1], lengths) + np.arange(sub_offsets[-1])
    owner, keys = presence(sub_offsets, cells[idx], plan.round, plan.n_locations)
    cand_keys = encode(plan.candidates, plan.n_locations)
    order = np.argsort(cand_keys)
    sorted_keys = cand_keys[order]
    pos = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    match = sorted_keys[pos] == keys
    return np.unique(trajectories[owner[match]] * g_count + order[pos[match]])


def _fastpub_aggregated(offsets, cells, plan: RoundPlan, rng, multiplicity) -> RoundAnswers:
    g_count, n = plan.n_candidates, plan.n
    owner = client_trajectories(multiplicity, len(offsets) - 1, plan.participants)
    # group participants by (trajectory, block start): clients of a group are asked the same n candidates
    pair, count = np.unique(owner * g_count + plan.first_candidate, return_counts=True)
    traj, first = pair // g_count, pair % g_count
    held = _held_pairs(offsets, cells, plan, np.unique(traj))
    asked = np.zeros(g_count, dtype=np.int64)
    holders = np.zeros(g_count, dtype=np.int64)
    for i in range(n):
        cand = (first + i) % g_count
        asked += np.bincount(cand, weights=count, minlength=g_count).astype(np.int64)
        key = traj * g_count + cand
        pos = np.minimum(np.searchsorted(held, key), max(len(held) - 1, 0))
        has = held[pos] == key if len(held) else np.zeros(len(key), bool)
        holders += np.bincount(cand[has], weights=count[has], minlength=g_count).astype(np.int64)
    yes = rng.binomial(holders, 1.0 - plan.eta) + rng.binomial(asked - holders, plan.eta)
    return RoundAnswers(round=plan.round, asked=asked, yes=yes, n_clients=len(plan.participants))


def respond_partition_per_client(offsets: np.ndarray, cells: np.ndarray, plan: RoundPlan,
                                 rng: np.random.Generator, multiplicity: np.ndarray | None = None
                                 ) -> RoundAnswers:
    """Reference path: each participant runs :func:`respond` on its own trajectory; the bits are summed."""
    offsets = np.asarray(offsets, dtype=np.int64)
    cells = np.asarray(cells, dtype=np.int64)
    check_csr(offsets, cells, plan.n_locations, "fastpub client partition")
    owner = client_trajectories(multiplicity, len(offsets) - 1, plan.participants)
    asked = np.zeros(plan.n_candidates, dtype=np.int64)
    yes = np.zeros(plan.n_candidates, dtype=np.int64)
    for u, first in zip(owner, plan.first_candidate, strict=True):
        block = plan.block(int(first))
        bits = respond(cells[offsets[u]:offsets[u + 1]], plan.eta, plan.candidates[block], rng)
        asked[block] += 1
        yes[block] += bits
    return RoundAnswers(round=plan.round, asked=asked, yes=yes, n_clients=len(plan.participants))


def _participant_weights(offsets, plan, multiplicity) -> tuple[np.ndarray, np.ndarray]:
    """Distinct trajectories of the participants and how many participants hold each (ids are sorted)."""
    owner = client_trajectories(multiplicity, len(offsets) - 1, plan.participants)
    if len(owner) == 0:
        return owner, owner
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    return owner[starts], np.diff(np.r_[starts, len(owner)])


def _triehh_votes(offsets, cells, plan: TriePlan, multiplicity) -> TrieVotes:
    """A participant whose first r−1 cells form a trie path votes for (that path, its r-th cell). No noise."""
    r, n_loc = plan.round, plan.n_locations
    votes = np.zeros((len(plan.prefixes), n_loc), dtype=np.int64)
    traj, weight = _participant_weights(offsets, plan, multiplicity)
    long_enough = offsets[traj + 1] - offsets[traj] >= r
    traj, weight = traj[long_enough], weight[long_enough]
    if len(traj) and len(plan.prefixes):
        heads = cells[offsets[traj][:, None] + np.arange(r)[None, :]]
        prefix_keys = encode(plan.prefixes, n_loc)
        order = np.argsort(prefix_keys)
        keys = encode(heads[:, : r - 1], n_loc)
        pos = np.minimum(np.searchsorted(prefix_keys[order], keys), len(order) - 1)
        on_trie = prefix_keys[order][pos] == keys
        node = order[pos[on_trie]]
        flat = np.bincount(node * n_loc + heads[on_trie, r - 1], weights=weight[on_trie],
                           minlength=votes.size)
        votes = flat.astype(np.int64).reshape(votes.shape)
    return TrieVotes(round=r, votes=votes, n_clients=len(plan.participants))


def _sfp_sketches(offsets, cells, plan: SfpPlan, rng, multiplicity) -> SfpSketches:
    """Every participant trims its trajectory to a word of T cells and reports one row of CMS-A (the word,
    ε_A) and one row of the CMS of one random even position (its 2-gram prefixed by the word's bucket, ε_B).

    Trimming (the authors' code): a trajectory shorter than T is padded at the end (symbol 0 below; cells are
    shifted to 1..L); a longer one contributes a uniformly random window of T cells. The sketch counts are
    built per client and randomised in aggregate: at each cell (row j, column c) the a clients whose hash hits
    c report +1 with probability 1−q and the others with probability q, so the number of +1 there is
    Bin(a, 1−q) + Bin(n_j − a, q), exactly the per-client sum.
    """
    t_len, base = plan.trim_length, plan.n_locations + 1
    n_pos, rows, cols = plan.n_positions, plan.rows, plan.columns
    owner = client_trajectories(multiplicity, len(offsets) - 1, plan.participants)
    d = len(owner)
    # every word a client of this partition can report: (distinct trajectory u, window start s)
    new = np.r_[True, owner[1:] != owner[:-1]] if d else np.zeros(0, bool)  # sorted, as the ids are
    used, slot = owner[new], np.cumsum(new) - 1
    lengths = offsets[used + 1] - offsets[used]
    n_starts = np.maximum(lengths - t_len + 1, 1)
    first_word = np.concatenate(([0], np.cumsum(n_starts)))
    word_owner = np.repeat(used, n_starts)
    word_start = np.arange(first_word[-1]) - np.repeat(first_word[:-1], n_starts)
    j = np.arange(t_len)[None, :]
    inside = j < (offsets[word_owner + 1] - offsets[word_owner])[:, None]
    gather = np.where(inside, offsets[word_owner][:, None] + word_start[:, None] + j, 0)
    symbols = np.where(inside, cells[gather] + 1, 0) if len(word_owner) else np.zeros((0, t_len), np.int64)
    word_keys = encode(symbols, base)
    bucket = word_buckets(word_keys, plan.hash_seed, plan.word_buckets)
    piece_keys = np.stack([(bucket * base + symbols[:, 2 * p]) * base + symbols[:, 2 * p + 1]
                           for p in range(n_pos)], axis=1) if len(word_keys) else np.zeros((0, n_pos), np.int64)
    # each client draws its window uniformly, then its position and its rows (client-side coins)
    word = first_word[slot] + np.floor(rng.random(d) * n_starts[slot]).astype(np.int64)
    position = rng.integers(0, n_pos, d)
    key_word, key_piece = mix(word_keys)[word], mix(piece_keys.ravel())[word * n_pos + position]
    ones = np.zeros((1 + n_pos, rows, cols), dtype=np.int64)
    clients = np.zeros((1 + n_pos, rows), dtype=np.int64)
    row_a, row_b = rng.integers(0, rows, d), rng.integers(0, rows, d)
    reports = [(0, np.ones(d, bool), row_a, key_word)] + [
        (1 + p, position == p, row_b, key_piece) for p in range(n_pos)
    ]
    for sketch, mask, row, key in reports:
        hashed = HashFamily(plan.hash_seed, sketch, rows, cols).column_of_mixed(row[mask], key[mask])
        hits = np.bincount(row[mask] * cols + hashed, minlength=rows * cols).reshape(rows, cols)
        clients[sketch] = np.bincount(row[mask], minlength=rows)
        q = flip_probability(plan.word_epsilon if sketch == 0 else plan.piece_epsilon)
        ones[sketch] = rng.binomial(hits, 1 - q) + rng.binomial(clients[sketch][:, None] - hits, q)
    return SfpSketches(ones=ones, clients=clients, n_clients=d)
