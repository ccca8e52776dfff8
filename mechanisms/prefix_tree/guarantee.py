"""The guarantee of a prefix-tree release, in words a data steward reads verbatim (Thm 4.3, Def. 3.5)."""

from __future__ import annotations

from mechanisms.prefix_tree.params import PrefixTreeParams
from trajpub import noise
from trajpub.guarantee import Guarantee, object_level_caveat

_NEIGHBOURING = {
    "add_remove": "add/remove one trajectory record",
    "replace": "replace one trajectory record",
}


def guarantee(params: PrefixTreeParams) -> Guarantee:
    """ε-DP per trajectory record (Chen, Fung, Desai, Thm 4.3), with the caveats that bound its meaning."""
    eps, h = params.epsilon, params.height
    differ = (
        "differ by adding or removing one trajectory record"
        if params.neighbouring == "add_remove"
        else "differ by replacing one trajectory record with another"
    )
    statement = (
        f"epsilon-differential privacy with epsilon = {eps:g} for each trajectory record: for any two input "
        f"databases that {differ}, the probability of every possible released database changes by at most a "
        f"factor exp({eps:g}). The noisy prefix tree of Chen, Fung and Desai spends epsilon/h = {params.epsilon_bar:g} "
        f"on each of its h = {h} levels (Laplace noise of scale {params.laplace_scale:g}, threshold "
        f"{params.theta:.4g}); the consistency step and the release read only the noisy tree."
    )
    object_level = object_level_caveat(params.epsilon, params.max_records_per_object)
    caveats = [
        object_level,
        (
            f"The location universe (the grid cells or stations) and the tree height h = {h} are public "
            "parameters fixed before looking at the data; trajectories longer than h are released only as "
            "their first h locations."
        ),
        noise.CAVEAT + " The number of empty candidates that pass the threshold (Thm 4.1) is drawn with "
        "numpy's binomial sampler, whose probabilities are exact only to floating-point precision.",
    ]
    if params.expansion_policy != "literal":
        caveats.append(_policy_deviation(params))
    return Guarantee.per_record(eps, statement, caveats, params.max_records_per_object,
                                neighbouring=_NEIGHBOURING[params.neighbouring])


def _policy_deviation(params: PrefixTreeParams) -> str:
    rules = []
    if params.expansion_policy == "parent_bound":
        rules.append(
            "keeps at most floor(c(v)/threshold) children of a node v, those with the largest noisy counts"
        )
    if params.min_expand_count == "auto" and params.expansion_policy == "parent_bound":
        rules.append("expands a node only when its noisy count is at least theta + b*ln(p_theta*|L|/0.5), "
                     "a value computed from public inputs that keeps subtrees of empty nodes finite")
    elif params.min_expand_count not in (None, "auto"):
        rules.append(f"expands a node only when its noisy count is at least {params.min_expand_count:g}")
    return (
        "Deviation from the paper: its Procedure 1 expands every noisy node, which explodes for a large "
        f"location universe. This release {'; it also '.join(rules)} (expansion policy "
        f"'{params.expansion_policy}'). These choices read only released noisy counts, so the privacy "
        "guarantee is unchanged, but the output differs from the paper's algorithm."
    )
