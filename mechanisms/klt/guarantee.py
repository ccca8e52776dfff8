"""The guarantee of a KLT release, in words a data steward reads verbatim (survey §2.2, §5)."""

from __future__ import annotations

from mechanisms.glove.guarantee import guarantee as glove_guarantee
from mechanisms.glove.guarantee import k_statement
from mechanisms.klt.params import KltParams
from trajpub.guarantee import Guarantee


def guarantee(params: KltParams, poi_source: str) -> Guarantee:
    """What a KLT release with ``params`` protects; ``poi_source`` says where the POIs come from (a label starting
    with "synthetic" marks synthetic POIs)."""
    base = glove_guarantee(params.glove())
    synthetic = poi_source.startswith("synthetic")
    statement = (
        f"{k_statement(params.glove(), 'as in GLOVE', every_fix_covered=False)} On top of that (KLT, Tu "
        f"et al. 2019), every published rectangle is grown over a grid of {params.poi_cell_deg:g}-degree cells "
        f"until the points of interest inside it belong to at least l = {params.l} distinct categories "
        f"(l-diversity) and their category distribution is within KL divergence t = {params.t:g} (natural log) of "
        "the distribution over the whole area (t-closeness); a rectangle that cannot reach both within "
        f"{params.max_expand_cells} rings of cells is suppressed from all the records of its group. The POIs come "
        f"from: {poi_source}.")
    if synthetic:
        statement += (" These are SYNTHETIC POIs drawn uniformly at random: this release is an experiment, and its "
                      "l-diversity and t-closeness say nothing about the real places people visited.")
    caveats = list(base.caveats)
    caveats = [c for c in caveats if not c.startswith("Homogeneity")]
    caveats.insert(0, "l-diversity and t-closeness are about the categories of the POIs inside a region, not about "
                      "where people actually stopped: an attacker who knows which POI a person visits, or who has "
                      "better POI data, is not hindered; distinct l-diversity allows one category to dominate.")
    caveats.append("The POI data is public and assumed complete; categories missing from it, or POIs outside "
                   "the area, are not counted.")
    if synthetic:
        caveats.insert(0, "SYNTHETIC POIs (uniform): not a real publication; the semantic protection is not "
                          "measured by this release.")
    return Guarantee.heuristic(
        "k-anonymity by generalisation with l-diversity and t-closeness of POI categories (KLT, heuristic)",
        base.privacy_unit, statement, caveats)
