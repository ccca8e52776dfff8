"""BASELINE, server side: Apple's sequence fragment puzzle (SFP) over private count-mean sketches.

Not FASTPub: the paper's industrial LDP baseline (§6.1, Apple, "Learning with Privacy at Scale", 2017).
Rebuilt from the FASTPub authors' code (github.com/inslab-ji/FASTPub):

* one round with ⌊0.8N⌋ clients (README); each trims its trajectory to T = 2⌈l_max/2⌉ cells (padding a short
  one at the end, a random window of a long one) and reports, ε-LDP in total:
  - CMS-A (ε_A = 0.25ε): one random row of the sketch of the whole word;
  - CMS-B_p (ε_B = 0.75ε) for one random even position p: the piece (bucket(word), w[p], w[p+1]), with a
    256-bucket hash of the word ("puzzle" prefix);
* the server keeps the ``sfp_top`` heaviest pieces per position, joins pieces of the same bucket over all
  positions (Cartesian product; a joined word must hash to that bucket), keeps words whose CMS-A estimate is
  ≥ k·n/N, and publishes their l_max-windows that contain no padding;
* count queries: the sum of CMS-A estimates over all paddings of the query to T cells, times N/n.

Sketch settings of the authors' code: 2048 rows × 1024 columns; coordinates of the ±1 one-hot flipped with probability
1/(1+e^{ε/2}). The server imports only the protocol and the public sketch functions.
"""

from __future__ import annotations

import itertools

import numpy as np

from mechanisms.fastpub.fragments import check_key_space, encode
from mechanisms.fastpub.params import FastPubParams
from mechanisms.fastpub.protocol import ClientPopulation, SfpPlan, SfpSketches
from mechanisms.fastpub.result import BaselineRound, FastPubResult, PublishedFragment
from mechanisms.fastpub.sampling import sample_clients
from mechanisms.fastpub.sketch import HashFamily, estimate, sketch_matrix, word_buckets
from trajpub.errors import InputError

MAX_PADDINGS = 1_000_000


class SfpQueryModel:
    """Count queries from CMS-A: Q(f) = N/n · Σ_{w ∈ paddings_T(f)} f̃_A(w) (the authors' code)."""

    def __init__(self, matrix: np.ndarray, n_reports: int, family: HashFamily, trim_length: int,
                 n_locations: int, scale: float):
        self.matrix, self.n_reports, self.family = matrix, n_reports, family
        self.trim_length, self.n_locations, self.scale = trim_length, n_locations, scale

    def word_estimates(self, words: np.ndarray) -> np.ndarray:
        """f̃_A of (m, T) words in symbols (cell + 1, 0 = padding), among the n reporting clients."""
        return estimate(self.matrix, self.n_reports, self.family, encode(words, self.n_locations + 1))

    def paddings(self, fragment) -> np.ndarray:
        """All distinct T-words holding ``fragment`` (cells) at some offset, padding only at the end."""
        t_len, n_loc = self.trim_length, self.n_locations
        q = [int(a) + 1 for a in fragment]
        free = t_len - len(q)
        if free < 0 or n_loc ** free * (free + 1) ** 2 > MAX_PADDINGS:
            return np.empty((0, t_len), dtype=np.int64)
        real = range(1, n_loc + 1)
        words = set()
        for offset in range(free + 1):
            after = free - offset
            suffixes = [s + (0,) * (after - r) for r in range(after + 1) for s in itertools.product(real, repeat=r)]
            for before in itertools.product(real, repeat=offset):
                for suffix in suffixes:
                    words.add(before + tuple(q) + suffix)
        return np.array(sorted(words), dtype=np.int64).reshape(-1, t_len)

    def query(self, fragment) -> float:
        return float(self.query_many([fragment])[0])

    def query_many(self, fragments) -> np.ndarray:
        """NaN for a fragment longer than T (SFP cannot answer it)."""
        blocks = [self.paddings(f) for f in fragments]
        sizes = np.array([len(b) for b in blocks])
        if sizes.sum() == 0:
            return np.full(len(blocks), np.nan)
        est = self.word_estimates(np.concatenate(blocks))
        sums = np.add.reduceat(est, np.r_[0, np.cumsum(sizes)[:-1]]) if len(est) else np.zeros(len(blocks))
        out = np.where(sizes > 0, sums * self.scale, np.nan)
        return out


def run_sfp(params: FastPubParams, population: ClientPopulation, n_locations: int,
            rng: np.random.Generator) -> FastPubResult:
    n_clients = int(population.size())
    per_round = params.participants_per_round(n_clients)
    if per_round < 1:
        raise InputError(f"floor(sfp_participation * N) = 0 with N = {n_clients}", "fastpub.sfp_participation")
    t_len, base = params.sfp_trim_length, n_locations + 1
    check_key_space(base, t_len)
    ids = sample_clients(rng, n_clients, per_round)
    plan = SfpPlan(participants=ids, trim_length=t_len, n_locations=n_locations, rows=params.sfp_rows,
                   columns=params.sfp_columns, word_buckets=params.sfp_word_buckets,
                   word_epsilon=params.sfp_word_epsilon, piece_epsilon=params.sfp_piece_epsilon,
                   hash_seed=params.sfp_hash_seed)
    answers = population.respond(plan)
    shape = (1 + plan.n_positions, params.sfp_rows, params.sfp_columns)
    if not isinstance(answers, SfpSketches) or answers.ones.shape != shape:
        raise InputError("the population answered another plan", "sfp round 1")

    pieces = [_top_pieces(answers, params, p, base) for p in range(plan.n_positions)]
    words = _assemble(pieces, params, base)
    word_matrix = sketch_matrix(answers.ones[0], answers.clients[0], params.sfp_word_epsilon)
    model = SfpQueryModel(word_matrix, int(answers.clients[0].sum()),
                          HashFamily(params.sfp_hash_seed, 0, params.sfp_rows, params.sfp_columns),
                          t_len, n_locations, n_clients / per_round)
    word_est = model.word_estimates(words) if len(words) else np.zeros(0)
    kept = words[word_est >= params.k * per_round / n_clients]
    fragments = _windows_without_padding(kept, params.l_max, base)
    values = model.query_many(fragments) if len(fragments) else np.zeros(0)
    published = tuple(PublishedFragment(tuple(int(a) for a in f), float(v), 1)
                      for f, v in zip(fragments, values, strict=True))
    logs = (BaselineRound({"round": 1, "n_participants": per_round, "trim_length": t_len,
                           "n_pieces_kept": int(sum(len(p) for p in pieces)), "n_words_joined": len(words),
                           "n_words_kept": len(kept)}),)
    return FastPubResult(params=params, status="published" if published else "none_admitted",
                         n_clients=n_clients, n_locations=n_locations, published=published, rounds=logs,
                         queries=model, stopped_round=1)


def _top_pieces(answers: SfpSketches, params: FastPubParams, position: int, base: int) -> np.ndarray:
    """The ``sfp_top`` pieces (bucket, x, y) with the largest CMS-B estimates at one position."""
    sketch = 1 + position
    bucket, x, y = np.meshgrid(np.arange(params.sfp_word_buckets), np.arange(base), np.arange(base),
                               indexing="ij")
    bucket, x, y = bucket.ravel(), x.ravel(), y.ravel()
    valid = (x > 0) | (y == 0)  # padding only at the end of a word
    if position == 0:
        valid &= x > 0  # a trajectory has at least one cell
    bucket, x, y = bucket[valid], x[valid], y[valid]
    matrix = sketch_matrix(answers.ones[sketch], answers.clients[sketch], params.sfp_piece_epsilon)
    family = HashFamily(params.sfp_hash_seed, sketch, params.sfp_rows, params.sfp_columns)
    est = estimate(matrix, int(answers.clients[sketch].sum()), family, (bucket * base + x) * base + y)
    top = np.argsort(-est, kind="stable")[: params.sfp_top]
    return np.stack([bucket[top], x[top], y[top]], axis=1)


def _assemble(pieces: list[np.ndarray], params: FastPubParams, base: int) -> np.ndarray:
    """Words joined from pieces of one bucket b at every position, kept when the word's own bucket is b and
    its padding is a suffix."""
    t_len = 2 * len(pieces)
    words, tags = [], []
    for b in sorted(set.intersection(*(set(p[:, 0].tolist()) for p in pieces))):
        for combo in itertools.product(*(p[p[:, 0] == b, 1:] for p in pieces)):
            words.append(np.concatenate(combo))
            tags.append(b)
    if not words:
        return np.empty((0, t_len), dtype=np.int64)
    words, tags = np.array(words, dtype=np.int64), np.array(tags, dtype=np.int64)
    padded = words == 0
    ok = np.all(padded[:, :-1] <= padded[:, 1:], axis=1)
    ok &= word_buckets(encode(words, base), params.sfp_hash_seed, params.sfp_word_buckets) == tags
    return np.unique(words[ok], axis=0).reshape(-1, t_len)


def _windows_without_padding(words: np.ndarray, length: int, base: int) -> np.ndarray:
    """The distinct ``length``-windows of ``words`` with no padding symbol, as cells (symbol − 1)."""
    t_len = words.shape[1] if len(words) else length
    parts = [words[:, s:s + length] for s in range(t_len - length + 1)] if len(words) else []
    if not parts:
        return np.empty((0, length), dtype=np.int64)
    out = np.concatenate(parts)
    out = out[np.all(out > 0, axis=1)] - 1
    _, first = np.unique(encode(out, base), return_index=True)
    return out[first]
