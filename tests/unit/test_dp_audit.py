"""The empirical DP audit (audits.dp_audit) on the DP mechanisms at a small scale: a mechanism run at its claim
must not be refuted, and one run with half the noise its claim needs (the mechanism lying by 2x) must be.

Fixed seeds. Each scenario puts at least 90 % of ε on one count, so at 2ε the true privacy loss of the audited
count is ≥ 1.8 > ε = 1; the run sizes are chosen so that the Clopper-Pearson bound of such a count clears 1.
The large run is ``python -m bench.dp_audit`` (bench/DP_AUDIT_RESULTS.md)."""

from __future__ import annotations

import html
import json
import math

import numpy as np
import pandas as pd
import pytest

from audits import dp_scenarios
from audits.dp_audit import audit_pair, clopper_pearson, epsilon_lower_bound, select_event
from mechanisms.fgs_pufferfish.guarantee import AUDIT_CORRELATION, AUDIT_PUBLISHED_MEAN
from mechanisms.fgs_pufferfish.guarantee import guarantee as fgs_guarantee
from mechanisms.fgs_pufferfish.params import FgsParams
from mechanisms.kpsi_anonymity import KPsiParams
from mechanisms.kpsi_anonymity.guarantee import AUDIT as KPSI_AUDIT
from mechanisms.kpsi_anonymity.guarantee import guarantee as kpsi_guarantee
from tasks.report import render
from tasks.review import Review
from trajpub import noise
from trajpub.config import PROJECT_ROOT
from trajpub.errors import ParameterError
from trajpub.guarantee import empirical_bound_words

EPS = 1.0


def test_clopper_pearson_has_its_closed_form_at_the_ends():
    n = 200
    assert clopper_pearson(0, n) == (0.0, pytest.approx(1 - 0.025 ** (1 / n)))
    assert clopper_pearson(n, n) == (pytest.approx(0.025 ** (1 / n)), 1.0)
    lo, hi = clopper_pearson(50, n)
    assert lo < 0.25 < hi
    with pytest.raises(ParameterError):
        clopper_pearson(3, 2)


def test_a_bound_needs_evidence():
    assert epsilon_lower_bound(0, 0, 100, 100) == 0.0
    assert epsilon_lower_bound(50, 50, 100, 100) == 0.0
    # 10 000 hits against 0 of 10 000: the bound is capped by the sample size, ln(0.99963 / 0.00037)
    assert epsilon_lower_bound(10_000, 0, 10_000, 10_000) == pytest.approx(
        math.log(0.025 ** (1 / 10_000) / (1 - 0.025 ** (1 / 10_000))))


def test_the_event_is_chosen_in_the_direction_of_the_evidence():
    rng = np.random.default_rng(0)
    event = select_event(rng.normal(0, 1, 5000), rng.normal(2, 1, 5000))
    assert event.above and event.first == 1


def _single_count(scale: float):
    return lambda which, n, rng: which + noise.laplace(scale, n, rng)


def test_one_laplace_count_is_tight_and_a_halved_scale_is_caught():
    honest = audit_pair(_single_count(1 / EPS), 2000, 10_000, np.random.default_rng(1))
    liar = audit_pair(_single_count(0.5 / EPS), 2000, 10_000, np.random.default_rng(2))
    assert 0.5 < honest.lower_bound <= EPS
    assert liar.lower_bound > EPS


SCENARIOS = {
    # name: (scenario, selection runs, fresh runs)
    "prefix_tree": (dp_scenarios.scenarios_of("prefix_tree")[0], 1000, 6000),
    "dpt": (dp_scenarios.scenarios_of("dpt")[0], 500, 4000),
    "adatrace": (dp_scenarios.scenarios_of("adatrace")[0], 320, 1920),
    "fastpub": (dp_scenarios.scenarios_of("fastpub")[0], 2000, 10_000),
    # ε per object: an object with 3x the record cap moves the noisy record count by the cap only, so it stays
    # within ε (a broken cap would move it 3x and be caught like the 2x lie)
    "objtrace": (dp_scenarios.scenarios_of("objtrace")[2], 1000, 6000),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_mechanism_meets_its_claim_and_a_2x_lie_is_caught(name):
    scenario, selection, runs = SCENARIOS[name]
    assert scenario.tight

    def at(epsilon):
        return lambda which, n, rng: scenario.run(which, n, epsilon, rng)

    honest = audit_pair(at(EPS), selection, runs, np.random.default_rng(11))
    liar = audit_pair(at(2 * EPS), selection, runs, np.random.default_rng(12))
    assert honest.lower_bound <= EPS, honest
    assert liar.lower_bound > EPS, liar


def test_an_object_with_three_records_is_protected_at_three_epsilon_not_epsilon():
    # Record-level DP: an object holding 3 records on one path moves that count by 3, so its privacy loss is
    # 3ε by group privacy (Dwork & Roth 2014, Thm 2.2), which the audit sees above ε and never above 3ε.
    scenario = dp_scenarios.scenarios_of("prefix_tree")[2]
    assert scenario.object_factor == 3 and not scenario.tight
    out = audit_pair(lambda which, n, rng: scenario.run(which, n, EPS, rng), 1000, 6000, np.random.default_rng(13))
    assert EPS < out.lower_bound <= 3 * EPS, out


# -- the non-DP claims: their audited empirical lower bound, printed in the guarantee and the review ----------

PRINTED = [AUDIT_PUBLISHED_MEAN, AUDIT_CORRELATION, KPSI_AUDIT]


@pytest.mark.parametrize("bound", PRINTED, ids=lambda b: b.neighbours)
def test_a_printed_bound_is_the_bench_row_of_a_scenario_of_the_claim(bound):
    assert bound.neighbours in {s.neighbours for s in dp_scenarios.all_scenarios() if s.mechanism == bound.mechanism}
    rows = json.loads((PROJECT_ROOT / "bench" / "dp_audit" / f"{bound.mechanism}.json").read_text())["rows"]
    (row,) = [r for r in rows if r["neighbours"] == bound.neighbours and not r["control"]]
    assert (row["run_epsilon"], row["lower_bound"], row["selection_runs"], row["runs"]) == (
        bound.claim_epsilon, bound.lower_bound, bound.selection_runs, bound.runs)
    # "unbounded" only when the statistic separated the datasets in every run
    assert bound.unbounded == (row["p_first"] == 1.0 and row["p_second"] == 0.0)


def test_the_guarantee_and_the_review_print_the_bound_that_applies():
    published = fgs_guarantee(FgsParams(n_slots=32, epsilon=1.0))
    perturbed = fgs_guarantee(FgsParams(n_slots=32, epsilon=1.0, mean_trajectory="perturb",
                                                  mean_noise_m=50.0))
    kpsi = kpsi_guarantee(KPsiParams())
    assert published.empirical_bound is AUDIT_PUBLISHED_MEAN and "unbounded" in published.plain_text()
    assert perturbed.empirical_bound is None and "not audited" in empirical_bound_words(perturbed.to_dict())
    assert kpsi.empirical_bound is KPSI_AUDIT and "0.46" in kpsi.plain_text()
    review = Review(release={"release_id": 1, "mechanism": "kpsi_anonymity", "dataset": "d",
                             "guarantee": kpsi.to_dict(), "summary": {}}, budget=["unit", "charge"], audits=[])
    page = render(review, pd.DataFrame(), None, None)
    assert html.escape(kpsi.empirical_bound.words()) in page
