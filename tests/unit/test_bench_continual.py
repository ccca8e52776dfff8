"""The publish/refuse pattern the year bench checks the ledger against (bench/continual.py)."""

from bench.continual import expected_pattern, fits


def test_a_per_week_cap_above_each_charge_lets_every_week_through():
    assert expected_pattern(52, 5.0, 10.0, 1) == [True] * 52
    assert expected_pattern(3, 10.0, 10.0, 1) == [True] * 3  # the cap itself is within the cap


def test_a_charge_over_the_per_week_cap_is_refused_every_week():
    assert expected_pattern(4, 11.0, 10.0, 1) == [False] * 4


def test_w_event_4_weeks_of_5_under_10_publish_two_then_refuse_two():
    """Weeks 1, 2 spend the 10; weeks 3 and 4 would put 15 in the runs 1-3 and 1-4 (2-4 too): refused; week 5
    shares its run 2-5 with week 2 only (10): charged; and so on."""
    assert expected_pattern(52, 5.0, 10.0, 4) == [True, True, False, False] * 13


def test_w_event_refused_weeks_charge_nothing_so_later_weeks_fit():
    """ε 3 under 10 over any 4 weeks: three weeks fit (9), the fourth would make 12; the fifth's run 2-5 holds
    weeks 2, 3 and itself (9): charged, as are the sixth (3, 5, 6) and seventh (5, 6, 7); the eighth's run 5-8
    would hold 12."""
    assert expected_pattern(12, 3.0, 10.0, 4) == [True, True, True, False] * 3


def test_w_event_a_run_reaching_back_before_the_first_week_counts_only_weeks_that_exist():
    assert expected_pattern(2, 5.0, 5.0, 4) == [True, False]
    assert expected_pattern(1, 5.0, 5.0, 52) == [True]


def test_a_week_asked_out_of_order_counts_the_runs_after_it_too():
    """Weeks 6 and 7 charged (ε 5 each, cap 10 over any 4): week 4 shares the run 4-7 with both (15): refused;
    week 2's runs end at week 5 at the latest (none charged): it fits; week 52 fits beside weeks 1 and 2."""
    assert not fits({6: 5.0, 7: 5.0}, 4, 5.0, 10.0, 4)
    assert fits({6: 5.0, 7: 5.0}, 2, 5.0, 10.0, 4)
    assert fits({1: 5.0, 2: 5.0}, 52, 5.0, 10.0, 4)
    assert fits({1: 5.0, 2: 5.0}, 52, 10.0, 10.0, 1)  # per week: another week's charge does not count


def test_the_weeks_a_commit_ran_are_written_as_spans_per_unit():
    from bench.continual import weeks_of

    assert weeks_of(["w-event 1", "w-event 2", "w-event 5", "object-week 52", "object-week 13", "object-week 14"]) \
        == "w-event weeks 1-2, 5; object-week weeks 13-14, 52"
