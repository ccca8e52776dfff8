"""The guarantee of a FASTPub release (or of a baseline run), in words a data steward reads verbatim.

Paper Thm 2 (ε-LDP), Thm 3 ((k, ξ)-anonymity of each admitted fragment), Thm 4 (loss-bounded k-anonymity,
heuristic: its proof assumes independent failures; docs/design.md, FASTPub).
"""

from __future__ import annotations

from mechanisms.fastpub.params import FastPubParams, noise_factor, theorem4_bound
from trajpub.guarantee import Guarantee, PrivacyMap

_UNIT = "one client = one trajectory"

_PER_TRAJECTORY = (
    "The protected unit is one trajectory (one client of the protocol). A person or vehicle with several "
    "trajectories is several clients: each trajectory answers with its own budget, so by sequential "
    "composition an object with r trajectories is protected at r x epsilon only, and nothing limits r here "
    "unless the pipeline keeps one trajectory per object before the mechanism."
)
_SIMULATION = (
    "In this pipeline the clients are simulated next to the raw data by the data owner; only the server side "
    "(candidate generation, aggregation, filtering) is barred from raw rows and receives aggregated randomised "
    "counts. The clients' coins come from a generator separate from the server's, and seeds are never "
    "published: a seed would give the coins, and the coins undo the randomised response."
)
_NO_K_FILTER = "No k-anonymity filter: fragments held by few clients can be published if the sketch says so."
_GRID = (
    "The grid (location universe) is a public parameter fixed before looking at the data; points outside it "
    "are dropped and consecutive repeats of one cell are collapsed by the project's preparation (the paper "
    "does not collapse them), so 'fragment' means a sequence of distinct consecutive cells."
)


def guarantee(params: FastPubParams) -> Guarantee:
    """ε-LDP per client (Thm 2), (k, ξ) per published fragment (Thm 3) and Thm 4's bound as a reported number."""
    if params.method == "triehh":
        return _triehh(params)
    if params.method == "sfp":
        return _sfp(params)
    eps, c, k, xi, l_max = params.epsilon, params.max_candidates, params.k, params.xi, params.l_max
    bound = theorem4_bound(l_max, xi)
    statement = (
        f"epsilon-local differential privacy with epsilon = {eps:g} for each trajectory. Each client (one "
        f"trajectory) is asked in at most one of the {l_max} rounds, about at most C = {c} candidate fragments, "
        "and answers each yes/no question 'is this fragment a contiguous part of my trajectory?' with the "
        f"answer flipped with probability eta = 1/(1+e^(epsilon/n)) (eta = {noise_factor(eps, c):.4g} when n = "
        f"{c}); its n answers together spend exactly epsilon (Wang et al., Thm 2). Everything released "
        "(the fragments, their estimated counts, count-query answers, per-round counts) is computed from these "
        "randomised answers only, so for any two trajectories a client could hold the probability of any "
        f"release changes by at most a factor exp({eps:g}); this is also epsilon-DP for replacing one "
        f"trajectory. In addition every published fragment passed the (k, xi)-anonymity test of Thm 3 with k = "
        f"{k} clients and xi = {xi:g}: a fragment held by fewer than k clients passes with probability at most "
        f"{xi:g}. Thm 4's bound on the expected anonymity loss of a published {l_max}-fragment is "
        f"{bound:.10g} location(s) (at most {c * bound:.6g} for a client answering {c} candidates), a "
        "reported number that is not enforced."
    )
    caveats = (
        _PER_TRAJECTORY,
        (
            f"(k, xi)-anonymity holds for each fragment separately, not for all of them at once: if many "
            f"candidates are held by fewer than k clients, about xi = {xi:g} of them may be admitted. Its proof "
            "(Hoeffding) needs the server to draw participants and assign candidates independently of the data, "
            "which this implementation does."
        ),
        (
            "Thm 4 (loss-bounded k-anonymity) assumes that the admission failures of different sub-fragments "
            "are independent, which the paper does not prove: its value is reported, not guaranteed."
        ),
        (
            "Count queries on fragments that were not admitted are answered from the Markov model of eq. 13 "
            "(post-processing: no privacy cost, but no accuracy guarantee; an unknown single location gets the "
            "arbitrary value k, as in the authors' code)."
        ),
        _SIMULATION,
        _GRID,
        (
            "A client's randomised-response coins are exact Bernoulli draws whose flip probability is rounded "
            "up to a multiple of 2^-53 (never more than epsilon). The aggregated simulation instead draws, per "
            "candidate, numpy binomials with the distribution of the sum of the clients' answers, exact only to "
            "floating-point precision; random bits come from numpy's PCG64 seeded with OS entropy."
        ),
    )
    return Guarantee(model="epsilon-LDP", privacy_unit=_UNIT, statement=statement, proven=True,
                     privacy_map=_ldp_map(params), neighbouring="any two trajectories of one client (local model); replace one trajectory",
                     epsilon=eps, caveats=caveats)


def _triehh(params: FastPubParams) -> Guarantee:
    statement = (
        "BASELINE FOR COMPARISON ONLY, no formal guarantee: TrieHH as the FASTPub authors ran it. Each sampled "
        "client sends the server, without noise, which trie node its trajectory prefix reaches and its next "
        f"location; the server keeps only children with at least rho*k = {params.rho * params.k:g} votes. "
        "The original TrieHH derives a central (epsilon, delta)-DP guarantee from sampling and thresholding; "
        "it is not computed here, and this version samples each round independently, so one client can vote "
        "in several rounds."
    )
    return Guarantee.heuristic("none (baseline)", _UNIT, statement,
                               (_PER_TRAJECTORY, "Not suitable for a release: raw prefixes reach the server."))


def _sfp(params: FastPubParams) -> Guarantee:
    statement = (
        f"BASELINE FOR COMPARISON: epsilon-local differential privacy with epsilon = {params.epsilon:g} per "
        "trajectory (Apple's sequence fragment puzzle over private count-mean sketches). Each of the clients "
        f"sampled once (fraction {params.sfp_participation:g}) reports one randomised sketch row of its "
        f"trimmed word (epsilon_A = {params.sfp_word_epsilon:g}) and one of a 2-cell piece "
        f"(epsilon_B = {params.sfp_piece_epsilon:g}); the two compose to epsilon."
    )
    return Guarantee(model="epsilon-LDP", privacy_unit=_UNIT, statement=statement, proven=True,
                     privacy_map=_ldp_map(params), neighbouring="any two trajectories of one client (local model); replace one trajectory",
                     epsilon=params.epsilon,
                     caveats=(_PER_TRAJECTORY, _NO_K_FILTER, _SIMULATION))


def _ldp_map(params: FastPubParams) -> PrivacyMap:
    """Each trajectory is a client spending epsilon: an object with at most ``max_records_per_object``
    trajectories (kept by the pipeline before the mechanism) spends that many times epsilon (sequential
    composition of its clients' randomisers)."""
    return PrivacyMap("epsilon-LDP", "group_privacy", params.max_records_per_object)
