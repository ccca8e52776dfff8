"""Parameters of a FASTPub run (or of one of its two baselines) and the constants derived from them.

Wang, Zhu, Wang, Han, "Secure Trajectory Publication in Untrusted Environments: A Federated Analytics
Approach", IEEE TMC 2022 (FASTPub), §5–§6.1 (defaults §6.1, budget §4.1 and §5.3, baselines §6.1 and the authors'
code), and the choices where the
paper is silent in docs/design.md, FASTPub. Every field is public: none may be chosen by looking at
the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trajpub.errors import ParameterError
from trajpub.params import Params, Scope

METHODS = ("fastpub", "triehh", "sfp")

_P = Scope("fastpub", required=("k",))
_RHO_SLACK = 1e-9  # ρ·l_max ≤ 1 up to floating-point rounding (0.2·5 is exactly 1 in binary, 0.1·10 is not)


@dataclass(frozen=True)
class FastPubParams(Params):
    """Public parameters of one run of FASTPub (default) or of a baseline of the paper's §6.

    method: "fastpub" (the paper's mechanism, Alg. 1–2), or one of the paper's two *baselines*, rebuilt from
        the authors' code: "triehh" (Google's federated heavy hitters, Zhu et al.
        2020, adapted to trajectories; no local noise, the paper's weak-privacy baseline) or "sfp" (Apple's
        sequence fragment puzzle over count-mean sketches, ε-LDP).

    FASTPub (paper defaults from §6.1):
    k: the anonymity threshold, an absolute number of clients over all N (no default: the paper sweeps
        100,000–500,000 on N ≈ 4.7e7). Required.
    epsilon: ε, the LDP budget of one client, spent in its single round (paper default 10).
    l_max: target fragment length = number of rounds (paper: 3, 4, 5).
    xi: ξ, the allowed error rate of (k, ξ)-anonymity (Def. 6, Thm 3; paper 0.01).
    rho: ρ, the fraction of the N clients drawn per round ("M" of Alg. 2; paper 0.2). FASTPub requires
        ρ·l_max ≤ 1 so that every client answers in at most one round (§4.1, §6.1; our choice: an error, where
        the authors' code would silently give later rounds fewer clients).
    max_candidates: C, the most candidates one client answers (paper and README: 5; the code's argparse
        default 10 is not used). A round asks n_l = min(C, |C_l|) per client (as §6.4 and App. D imply).
    lam: λ, Markov cleaning threshold (eq. 14): from round 3 a candidate is removed when its Markov estimate
        is < λ·k (paper 0.8). λ = 0 disables cleaning.

    TrieHH baseline (the authors' code):
    triehh_rounds: the number of trie levels R; ``None`` means l_max (the paper caps TrieHH's rounds at
        FASTPub's number, §6.1). Each round draws ⌊ρN⌋ clients independently of earlier rounds.

    SFP baseline (the authors' code; the paper gives only "1024-bit sketches" and the trimming of footnote 8):
    sfp_participation: the fraction of clients in SFP's single round (README: 0.8).
    sfp_rows, sfp_columns: the hash rows k and columns m of each count-mean sketch (authors' code: 2048 × 1024).
        Decoding costs (|L|+1)²·sfp_word_buckets·sfp_rows hash evaluations per puzzle position, so benches on
        a 64-cell grid use fewer rows (documented where they do). ``sfp_columns`` must be a power of two.
    sfp_word_buckets: the buckets of the word hash that prefixes each puzzle piece (authors' code: 256; power of two).
    sfp_top: how many (hash, 2-gram) pieces the server keeps per position (authors' code: default 20; README 80).
    sfp_word_share: the share of ε spent on the whole trimmed word (authors' code: 0.25); the rest goes to one piece.
    sfp_hash_seed: selects the public hash functions of the sketches. Not a secret: in SFP the hash family is
        part of the protocol, known to every client and to the server.

    max_records_per_object: the pipeline's cap on trajectories (clients) per object, kept before the
        mechanism; an object then spends at most that many times epsilon (None: unbounded).
    """

    scope = _P

    k: int | None = None
    method: str = "fastpub"
    epsilon: float = 10.0
    l_max: int = 3
    xi: float = 0.01
    rho: float = 0.2
    max_candidates: int = 5
    lam: float = 0.8
    triehh_rounds: int | None = None
    sfp_participation: float = 0.8
    sfp_rows: int = 2048
    sfp_columns: int = 1024
    sfp_word_buckets: int = 256
    sfp_top: int = 20
    sfp_word_share: float = 0.25
    sfp_hash_seed: int = 0
    max_records_per_object: int | None = None

    def __post_init__(self) -> None:
        _P.require_choice(self.method, "method", METHODS)
        if self.k is None:
            raise ParameterError("k (the anonymity threshold, an absolute number of clients) is required",
                                 _P.where("k"))
        _P.require_int(self.k, "k", 1)
        _P.require_real(self.epsilon, "epsilon", 0)
        _P.require_int(self.l_max, "l_max", 1)
        _P.require_real(self.xi, "xi", 0, 1)
        if self.xi >= 1:
            raise ParameterError(f"xi must be < 1, got {self.xi!r}", _P.where("xi"))
        _P.require_real(self.rho, "rho", 0, 1)
        _P.require_int(self.max_candidates, "max_candidates", 1)
        _P.require_real(self.lam, "lam", 0, open_low=False)
        if self.method == "fastpub" and self.rho * self.l_max > 1 + _RHO_SLACK:
            raise ParameterError(
                f"rho * l_max = {self.rho * self.l_max:g} > 1: FASTPub draws fresh clients in each of its "
                "l_max rounds and every client answers at most once (Wang et al. 2022, §6.1)",
                _P.where("rho"),
            )
        if self.triehh_rounds is not None:
            _P.require_int(self.triehh_rounds, "triehh_rounds", 1)
        _P.require_real(self.sfp_participation, "sfp_participation", 0, 1)
        _P.require_int(self.sfp_rows, "sfp_rows", 1)
        for name in ("sfp_columns", "sfp_word_buckets"):
            value = getattr(self, name)
            _P.require_int(value, name, 2)
            if value & (value - 1) or value > 2**32:
                raise ParameterError(f"{name} must be a power of two <= 2**32, got {value!r}", _P.where(name))
        _P.require_int(self.sfp_top, "sfp_top", 1)
        _P.require_optional_int(self.max_records_per_object, "max_records_per_object", 1)
        _P.require_real(self.sfp_word_share, "sfp_word_share", 0, 1)
        if self.sfp_word_share >= 1:
            raise ParameterError("sfp_word_share must be < 1 (the puzzle pieces need budget too)",
                                 _P.where("sfp_word_share"))
        _P.require_int(self.sfp_hash_seed, "sfp_hash_seed", 0)



    # ---- derived constants ------------------------------------------------------------------------------

    def participants_per_round(self, n_clients: int) -> int:
        """D = ⌊ρN⌋ clients per round (the authors' code); the slack absorbs 0.29·100 = 28.999…"""
        fraction = self.sfp_participation if self.method == "sfp" else self.rho
        d = math.floor(fraction * n_clients + _RHO_SLACK)
        if self.method == "fastpub":
            d = min(d, n_clients // self.l_max)
        return d

    @property
    def rounds(self) -> int:
        """The number of client rounds: l_max (FASTPub), R (TrieHH) or 1 (SFP)."""
        if self.method == "sfp":
            return 1
        if self.method == "triehh" and self.triehh_rounds is not None:
            return self.triehh_rounds
        return self.l_max

    @property
    def sfp_trim_length(self) -> int:
        """T = 2⌈l/2⌉: SFP trims every trajectory to this even length (the authors' code; paper footnote 8)."""
        return 2 * math.ceil(self.l_max / 2)

    @property
    def sfp_word_epsilon(self) -> float:
        """ε_A = 0.25·ε spent on the whole trimmed word (the authors' code)."""
        return self.sfp_word_share * self.epsilon

    @property
    def sfp_piece_epsilon(self) -> float:
        """ε_B = 0.75·ε spent on one puzzle piece; ε_A + ε_B = ε (sequential composition)."""
        return self.epsilon - self.sfp_word_epsilon


def noise_factor(epsilon: float, n: int) -> float:
    """η = 1/(1 + e^{ε/n}): the flip probability at which n bits spend exactly ε (Thm 2 with equality).

    Then p = P(b'=1 | b=1) = 1 − η and q = P(b'=1 | b=0) = η, and n·ln((1−η)/η) = ε (Thm 2 taken with equality).
    ``epsilon = inf`` gives η = 0 (the noise-free test hook, no privacy).
    """
    if n < 1:
        raise ParameterError(f"a client must answer at least one candidate, got n = {n}", "fastpub.n")
    if math.isinf(epsilon):
        return 0.0
    return 1.0 / (1.0 + math.exp(epsilon / n))


def theorem4_bound(length: int, xi: float) -> float:
    """Thm 4 (eq. 18): E[τ(f)] ≤ Σ_{x=1}^{l} ξ^{(x²+x−2)/2} for a published l-fragment f.

    A *reported* number, not an enforced property: the proof (App. C) assumes that the failures of different
    sub-fragments are independent, which the paper does not prove (docs/design.md, FASTPub). bound(1, ξ) = 1 and
    bound(3, 0.01) = 1 + 1e-4 + 1e-10. A client that answers n candidates has the total bound n·bound.
    """
    if length < 1 or not 0 < xi < 1:
        raise ParameterError(f"need length >= 1 and 0 < xi < 1, got {length}, {xi}", "fastpub.theorem4")
    return math.fsum(xi ** ((x * x + x - 2) / 2) for x in range(1, length + 1))
