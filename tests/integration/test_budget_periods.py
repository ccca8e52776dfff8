"""Units of protection per period on the real database (sql/031): the ledger per object-week, w-event and
lifetime caps enforced by the ledger's trigger under the dataset's row lock (racing charges exact), the unit
frozen under charges, the unit stated with the release (review, lineage, the consumer's card), and the CLI's
unit, cap, show and forecast. Bare datasets with ledger rows: no flow runs."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from tasks import governance, publish
from tasks.db import database_url, steward_engine
from tests.integration.conftest import cli, to_awaiting_approval
from trajpub.errors import PolicyError
from trajpub.guarantee import Guarantee, PrivacyMap
from trajpub.periods import Unit

pytestmark = pytest.mark.integration

MONDAY = datetime(2008, 2, 3, 16, tzinfo=UTC)  # Monday 4 February 2008, 00:00 in Beijing


def week(k: int, days: float = 7, offset_days: float = 0) -> tuple[datetime, datetime]:
    """A window from Monday 00:00 (Beijing) of week k (0: the week of 4 February 2008), ``days`` long."""
    start = MONDAY + timedelta(weeks=k, days=offset_days)
    return start, start + timedelta(days=days)


def per_object(epsilon: float) -> Guarantee:
    return Guarantee(model="epsilon-DP", privacy_unit="one object", statement="test", proven=True, epsilon=epsilon,
                     privacy_map=PrivacyMap("epsilon-DP", "per_object"))


@pytest.fixture
def weekly(owner, stewards, bare_dataset):
    """A bare dataset of Beijing (cap 10 per object-week) and a function that declares its unit."""
    with owner.begin() as conn:
        conn.execute(sa.text("UPDATE governance.datasets SET timezone = 'Asia/Shanghai', epsilon_cap = 10"
                             " WHERE dataset = :d"), {"d": bare_dataset})

    def declare(period: str | None = "week", w: int = 1, week_start: str = "monday") -> str:
        with stewards["ada"].begin() as conn:
            governance.set_privacy_unit(conn, bare_dataset, Unit("object", period, w, week_start=week_start))
        return bare_dataset

    return declare


def release_on(engine, dataset: str, window: tuple[datetime | None, datetime | None]) -> int:
    with engine.begin() as conn:
        return governance.create_release(conn, {"dataset": dataset, "mechanism": "m", "requested_by": "requester",
                                                "window_start": window[0] and window[0].isoformat(),
                                                "window_end": window[1] and window[1].isoformat()}, {}, {})


def charge(engine, dataset: str, window, epsilon: float) -> int:
    """A release on ``window`` charged ``epsilon`` per object (refusals raise PolicyError)."""
    rid = release_on(engine, dataset, window)
    with engine.begin() as conn:
        governance.charge_budget(conn, rid, dataset, "m", per_object(epsilon))
    return rid


def test_disjoint_weeks_compose_in_parallel_and_a_window_on_two_weeks_is_charged_to_both(engine, weekly):
    dataset = weekly("week")
    charge(engine, dataset, week(0), 5.0)
    charge(engine, dataset, week(0, days=2), 5.0)
    with pytest.raises(PolicyError, match=r"needs epsilon-DP epsilon 1 per object-week but dataset .* has only 0 "
                                          r"of its cap 10 left in the week from 2008-02-04"):
        charge(engine, dataset, week(0, days=1, offset_days=3), 1.0)
    charge(engine, dataset, week(1), 5.0)  # another week: its own cap
    spanning = charge(engine, dataset, week(1, offset_days=3), 5.0)  # Thursday to Thursday: weeks 1 and 2
    with pytest.raises(PolicyError, match="only 0 of its cap 10 left in the week from 2008-02-11"):
        charge(engine, dataset, week(1, days=1), 0.5)
    with pytest.raises(PolicyError, match="only 5 of its cap 10 left in the week from 2008-02-18"):
        charge(engine, dataset, week(2), 5.5)
    charge(engine, dataset, week(2), 5.0)
    with engine.connect() as conn:
        periods = conn.execute(sa.text("SELECT period, period_first, period_last FROM governance.budget_ledger"
                                       " WHERE release_id = :r"), {"r": spanning}).one()
        acc = governance.accounts(conn, dataset)["epsilon-DP"]
    assert tuple(periods) == ("week", datetime(2008, 2, 11), datetime(2008, 2, 18))
    assert acc.spent == 25.0  # over the dataset's life one object has spent 25, in weeks capped at 10
    assert acc.describe().startswith("epsilon-DP: cap 10 per object-week; epsilon 25 per object over the dataset's "
                                     "life, 5 release(s)")


def test_a_release_without_a_closed_window_is_refused_under_a_per_period_unit(engine, weekly):
    dataset = weekly("week")
    for window in ((None, None), (MONDAY, None)):
        with pytest.raises(PolicyError, match="accounted per object-week, so a release needs a window with both "
                                              "ends"):
            charge(engine, dataset, window, 1.0)


def test_w_event_bounds_any_w_consecutive_weeks_counting_each_release_once(engine, weekly):
    """Kellaris et al. 2014, Def. 3, w = 3 weeks, cap 10."""
    dataset = weekly("week", w=3)
    charge(engine, dataset, week(0), 4.0)
    charge(engine, dataset, week(1), 4.0)
    with pytest.raises(PolicyError, match=r"only 2 of its cap 10 left over the 3 weeks from 2008-02-04 \(w-event\)"):
        charge(engine, dataset, week(2), 3.0)
    charge(engine, dataset, week(2), 2.0)
    with pytest.raises(PolicyError, match="only 4 of its cap 10 left over the 3 weeks from 2008-02-11"):
        charge(engine, dataset, week(3), 5.0)
    charge(engine, dataset, week(3), 4.0)
    # one release on weeks 10 and 11 is one mechanism on that data: counted once in the run of weeks 10-12
    charge(engine, dataset, week(10, days=14), 6.0)
    charge(engine, dataset, week(12), 4.0)
    with pytest.raises(PolicyError, match="only 0 of its cap 10"):
        charge(engine, dataset, week(12), 0.1)


def test_the_lifetime_cap_bounds_every_charge(engine, weekly):
    dataset = weekly("week")
    out = cli("budget", "cap", dataset, "12", "--lifetime", "--steward", "ada")
    assert out.returncode == 0 and "lifetime ε cap set to 12" in out.stdout, out.stderr
    charge(engine, dataset, week(0), 5.0)
    charge(engine, dataset, week(1), 5.0)
    with pytest.raises(PolicyError, match="has only 2 of its lifetime cap 12 per object left"):
        charge(engine, dataset, week(2), 5.0)
    charge(engine, dataset, week(2), 2.0)


def test_racing_charges_are_exact_per_week(engine, owner, weekly):
    """20 releases charge ε = 1 at the same moment, 10 in each of two weeks, against a cap of 5.5 per
    object-week: exactly 5 are charged in each week (the trigger's row lock), and the weeks do not share it."""
    dataset = weekly("week")
    jobs = [(release_on(engine, dataset, week(k)), k) for k in (0, 1) for _ in range(10)]
    with owner.begin() as conn:
        conn.execute(sa.text("UPDATE governance.datasets SET epsilon_cap = 5.5 WHERE dataset = :d"), {"d": dataset})
    barrier = threading.Barrier(len(jobs), timeout=60)
    outcomes: dict[int, str] = {}
    unpooled = sa.create_engine(engine.url, poolclass=sa.pool.NullPool)  # one connection per thread

    def run(rid: int) -> None:
        with unpooled.connect() as conn:
            barrier.wait()
            try:
                with conn.begin():
                    governance.charge_budget(conn, rid, dataset, "m", per_object(1.0))
                outcomes[rid] = "charged"
            except PolicyError:
                outcomes[rid] = "refused"

    threads = [threading.Thread(target=run, args=(rid,)) for rid, _ in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(outcomes) == 20
    with engine.connect() as conn:
        per_week = dict(conn.execute(sa.text(
            "SELECT period_first, sum(unit_epsilon) FROM governance.budget_ledger WHERE dataset = :d"
            " GROUP BY period_first"), {"d": dataset}).all())
    assert per_week == {datetime(2008, 2, 4): 5.0, datetime(2008, 2, 11): 5.0}
    assert sum(1 for o in outcomes.values() if o == "charged") == 10


def test_the_database_enforces_the_periods_and_caps_a_client_skips(engine, weekly):
    """The pipeline writing the ledger directly: the trigger writes the periods from the release's window
    (a forged week is overwritten) and refuses a charge over the week's cap."""
    dataset = weekly("week")
    insert = ("INSERT INTO governance.budget_ledger (dataset, release_id, mechanism, epsilon, delta, privacy_unit,"
              " account, unit, unit_epsilon, unit_delta, conversion, period, period_first, period_last) VALUES"
              " (:d, :r, 'm', :e, 0, 'one object', 'epsilon-DP', 'object', :e, 0, 'test', 'day',"
              " '1999-01-04', '1999-01-04')")
    rid = release_on(engine, dataset, week(0))
    with engine.begin() as conn:
        conn.execute(sa.text(insert), {"d": dataset, "r": rid, "e": 8.0})
        row = conn.execute(sa.text("SELECT period, period_first, period_last FROM governance.budget_ledger"
                                   " WHERE release_id = :r"), {"r": rid}).one()
    assert tuple(row) == ("week", datetime(2008, 2, 4), datetime(2008, 2, 4))
    over = release_on(engine, dataset, week(0, days=1))
    with engine.begin() as conn, pytest.raises(sa.exc.DBAPIError, match="only 2 of its cap 10 left in the week"):
        conn.execute(sa.text(insert), {"d": dataset, "r": over, "e": 3.0})


def test_the_unit_cannot_change_under_charges(engine, owner, stewards, weekly):
    dataset = weekly("week")
    out = cli("budget", "unit", dataset, "record", "--period", "week", "--steward", "ada")
    assert out.returncode == 1 and "needs the unit 'object'" in out.stderr and "Traceback" not in out.stderr
    charge(engine, dataset, week(0), 1.0)
    out = cli("budget", "unit", dataset, "object", "--steward", "ada")
    assert out.returncode == 1, out.stdout
    assert out.stderr.strip().splitlines() == [(
        f"error: dataset '{dataset}' already has 1 ledger entries in its unit; the unit cannot change under them "
        "(budget unit)")], out.stderr
    for column, value in (("budget_w", 2), ("budget_period", "'month'")):  # past the CLI: the database refuses
        with stewards["ada"].begin() as conn, pytest.raises(sa.exc.DBAPIError, match="cannot change under them"):
            conn.execute(sa.text(f"UPDATE governance.datasets SET {column} = {value} WHERE dataset = :d"),
                         {"d": dataset})
    with owner.begin() as conn, pytest.raises(sa.exc.DBAPIError, match="cannot change under them"):
        conn.execute(sa.text("UPDATE governance.datasets SET timezone = 'Europe/Berlin' WHERE dataset = :d"),
                     {"d": dataset})


def test_python_and_the_database_align_periods_alike(engine):
    """The forecast's period arithmetic (trajpub.periods) and the ledger's (governance.period_start) on the
    edges: Beijing's Monday, Berlin's daylight-saving days, a month's end."""
    from trajpub.periods import period_start

    cases = [(MONDAY - timedelta(microseconds=1), "week", "Asia/Shanghai"), (MONDAY, "week", "Asia/Shanghai"),
             (datetime(2026, 3, 29, 22, 30, tzinfo=UTC), "day", "Europe/Berlin"),
             (datetime(2026, 10, 25, 22, 30, tzinfo=UTC), "day", "Europe/Berlin"),
             (datetime(2008, 2, 29, 16, tzinfo=UTC), "month", "Asia/Shanghai"), (MONDAY, "day", None)]
    with engine.connect() as conn:
        for t, period, tz in cases:
            db = conn.execute(sa.text("SELECT governance.period_start(:t, :p, :z)"),
                              {"t": t, "p": period, "z": tz}).scalar_one()
            assert db == period_start(t, period, tz), (t, period, tz)
            for first in ("monday", "sunday", "saturday"):  # a week from the dataset's first day (sql/040)
                db = conn.execute(sa.text("SELECT governance.period_start(:t, :p, :z, :w)"),
                                  {"t": t, "p": period, "z": tz, "w": first}).scalar_one()
                assert db == period_start(t, period, tz, first), (t, period, tz, first)


def test_a_sunday_week_dataset_charges_a_sunday_to_saturday_window_to_one_week(engine, weekly, stewards):
    """A dataset whose weeks start on Sunday (`budget unit --week-starts sunday`): a Sunday-to-Sunday window is one
    object-week (under ISO weeks it touched two), the ledger's periods and the cap follow it, and the first day
    cannot change under charges."""
    dataset = weekly("week", week_start="sunday")
    sunday = week(0, offset_days=-1)  # Sunday 3 to Sunday 10 February 2008, Beijing
    rid = charge(engine, dataset, sunday, 6.0)
    with engine.connect() as conn:
        first, last = conn.execute(sa.text("SELECT period_first, period_last FROM governance.budget_ledger"
                                           " WHERE release_id = :r"), {"r": rid}).one()
        assert governance.unit_of(conn, dataset).week_start == "sunday"
    assert first == last == datetime(2008, 2, 3)
    charge(engine, dataset, week(0, days=1, offset_days=6), 4.0)  # Sunday 10 February: the next week, its own cap
    with pytest.raises(PolicyError, match="only 4 of its cap 10 left in the week from 2008-02-03"):
        charge(engine, dataset, week(0, days=1, offset_days=5), 5.0)  # Saturday 9 February: the first week
    with pytest.raises(Exception, match="cannot change under"), stewards["ada"].begin() as conn:
        conn.execute(sa.text("UPDATE governance.datasets SET week_start = 'monday' WHERE dataset = :d"),
                     {"d": dataset})


def test_the_unit_is_stated_in_the_review_lineage_and_the_consumers_card(engine, weekly):
    dataset = weekly("week")
    with engine.begin() as conn:
        stated = governance.guarantee_record(conn, dataset, per_object(5.0))
        rid = governance.create_release(conn, {"dataset": dataset, "mechanism": "m", "requested_by": "requester",
                                               "window_start": week(0)[0].isoformat(),
                                               "window_end": week(0)[1].isoformat()}, {}, stated)
        governance.charge_budget(conn, rid, dataset, "m", per_object(5.0))
    expected = ("epsilon 5 per object-week; 52 weekly releases like this one: epsilon 260 per object over the year "
                "(sequential composition across periods); cap 10 per object-week. Unit of protection: one "
                "object-week (one object's records in one week; ISO weeks from Monday 00:00, Asia/Shanghai); "
                "releases of different weeks compose in parallel.")
    assert stated["protection"]["statement"] == expected
    to_awaiting_approval(engine, rid)
    with engine.connect() as conn:
        review = governance.budget_lines(conn, governance.get_release(conn, rid))
    assert f"As this release states it: {expected}" in review
    with steward_engine("ada").begin() as conn:
        governance.decide(conn, rid, "approved", None)
    publish.publish(engine, rid, None)
    with engine.connect() as conn:
        facet = conn.execute(sa.text("SELECT event -> 'run' -> 'facets' -> 'guarantee' -> 'protection'"
                                     " FROM governance.lineage_events WHERE release_id = :r AND event_type = "
                                     "'COMPLETE'"), {"r": rid}).scalar_one()
    assert facet["statement"] == expected and facet["unit"] == "object-week"
    consumer = sa.create_engine(database_url("trajpub_consumer"))
    with consumer.connect() as conn:
        card = conn.execute(sa.text("SELECT guarantee -> 'protection' ->> 'statement' FROM published.release_lineage"
                                    " WHERE release_id = :r"), {"r": rid}).scalar_one()
    assert card == expected


WEEKLY_SPEC = {"requested_by": "scheduler", "bbox": [115.4, 39.4, 117.6, 41.1], "window_start": "2008-02-02",
               "window_end": "2008-02-09", "mechanism": "objtrace",
               "params": {"epsilon": 5.0, "cell_size_m": 4000},
               "prepare": {"cell_size_m": 2000}}


@pytest.fixture
def weekly_deployment(weekly):
    """The shipped weekly deployment's spec (objtrace, epsilon 5 per taxi, the week of 2 February 2008) on the
    dataset, registered on the Prefect server with its schedule (Mondays 03:00, Beijing)."""
    from prefect.schedules import Cron

    from flows.release import release_flow

    dataset = weekly("week")
    spec = {"dataset": dataset, **WEEKLY_SPEC}
    name = f"forecast-{uuid.uuid4().hex[:8]}"
    release_flow.to_deployment(name=name, schedules=[Cron("0 3 * * 1", timezone="Asia/Shanghai")],
                               parameters={"spec": spec}).apply()
    return dataset, f"release/{name}"


def test_budget_show_forecasts_a_deployment(engine, weekly_deployment):
    """The shipped spec's fixed window (2-9 February 2008, Beijing) touches the weeks of 28 January and
    4 February: at epsilon 5 per run and a cap of 10 per object-week, two more runs fit, the third is refused."""
    dataset, deployment = weekly_deployment
    out = cli("budget", "show", "--forecast", deployment, "--periods", "3")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (f"{dataset}: each run is charged epsilon-DP epsilon 5 per object-week; cap 10 per "
                        "object-week")
    assert len(lines[1:4]) == 3 and all(line.endswith(": 10 left") for line in lines[1:4]), lines
    assert "in the next year; the caps allow 2 more (2 runs at epsilon 5 per object-week: epsilon 10 per object " \
           "over the year)" in lines[4]
    assert lines[5].endswith("would be refused: only 0 of the cap 10 per object-week left in the week from "
                             "2008-01-28"), lines
    charge(engine, dataset, (datetime(2008, 2, 2, tzinfo=UTC), datetime(2008, 2, 9, tzinfo=UTC)), 5.0)
    assert "the caps allow 1 more" in cli("budget", "show", "--forecast", deployment).stdout
    for args, message in ((("--forecast", "release/nobody"), "deployment 'release/nobody' does not exist"),
                          (("--forecast", deployment, "--dataset", "other"), "releases dataset")):
        out = cli("budget", "show", *args)
        assert out.returncode == 1 and message in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_budget_show_forecasts_the_shipped_relative_window(engine, weekly):
    """The shipped weekly deployment's own window ({last: 7d, align: local_week}: each Monday's run releases the
    Beijing week before it) is resolved at each run, ObjTrace's window ends with it: under w-event (week, 4) and
    a cap of 10, ObjTrace's 5 per run lets two more runs through and refuses the third (the forecast used to
    refuse the spec itself, its window's ends being unset before it is resolved)."""
    from prefect.schedules import Cron

    from flows.release import release_flow

    dataset = weekly("week", 4)
    fixed = {k: v for k, v in WEEKLY_SPEC.items() if k not in ("window_start", "window_end")}
    spec = {"dataset": dataset, **fixed, "window": {"last": "7d", "align": "local_week"}}
    name = f"forecast-rel-{uuid.uuid4().hex[:8]}"
    release_flow.to_deployment(name=name, schedules=[Cron("0 3 * * 1", timezone="Asia/Shanghai")],
                               parameters={"spec": spec}).apply()
    out = cli("budget", "show", "--forecast", f"release/{name}", "--periods", "3")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"{dataset}: each run is charged epsilon-DP epsilon 5 per object-week"), lines
    assert "the caps allow 2 more" in out.stdout, lines
    assert "would be refused: only 0 of the cap 10" in lines[-1], lines


def test_budget_unit_and_show_state_the_unit(bare_dataset, owner):
    with owner.begin() as conn:
        conn.execute(sa.text("UPDATE governance.datasets SET timezone = 'Asia/Shanghai' WHERE dataset = :d"),
                     {"d": bare_dataset})
    out = cli("budget", "unit", bare_dataset, "object", "--period", "week", "--w-event", "4", "--steward", "ada")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        f"{bare_dataset}: unit of protection set to one object-week (one object's records in one week; ISO weeks "
        "from Monday 00:00, Asia/Shanghai); w-event privacy: the releases of any 4 consecutive weeks together")
    shown = cli("budget", "show", "--dataset", bare_dataset).stdout
    assert "epsilon-DP: cap 5.5 over any 4 consecutive weeks per object (w-event); epsilon 0 per object" in shown


def test_budget_unit_records_the_datasets_first_day_of_the_week(bare_dataset):
    bad = cli("budget", "unit", bare_dataset, "object", "--period", "week", "--week-starts", "sun", "--steward", "ada")
    assert bad.returncode == 1 and bad.stderr.startswith("error: a week starts on one of monday, "), bad.stderr
    out = cli("budget", "unit", bare_dataset, "object", "--period", "week", "--week-starts", "Sunday", "--steward",
              "ada")
    assert out.returncode == 0, out.stderr
    assert "one object-week (one object's records in one week; weeks from Sunday 00:00, UTC)" in out.stdout
    shown = cli("dataset", "show", bare_dataset)
    assert "weeks start on Sunday" in shown.stdout, shown.stdout + shown.stderr


def test_deploy_warns_when_the_schedule_would_hit_a_cap(weekly, tmp_path):
    """`trajpub deploy` says, before it serves, at which run the caps stop the schedule."""
    import os
    import subprocess

    import yaml
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    from tests.integration.conftest import TRAJPUB, wait_until

    dataset = weekly("week")
    path = tmp_path / "weekly.yaml"
    path.write_text(yaml.safe_dump({"dataset": dataset, **WEEKLY_SPEC}))
    name = f"warn-{uuid.uuid4().hex[:6]}"
    proc = subprocess.Popen([TRAJPUB, "deploy", "--spec", str(path), "--name", name, "--cron", "0 3 * * 1",
                             "--timezone", "Asia/Shanghai"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "TRAJPUB_TEST_MODE": "1"})

    def registered():
        assert proc.poll() is None
        with get_client(sync_client=True) as client:
            try:
                return client.read_deployment_by_name(f"release/{name}")
            except ObjectNotFound:
                return None

    try:
        wait_until(registered, 120, f"deployment release/{name}")
    finally:
        proc.terminate()
        output = proc.communicate(timeout=60)[0]
    warning = next(line for line in output.splitlines() if line.startswith("warning:"))
    assert f"the schedule would hit a cap of dataset '{dataset}' at its run of" in warning
    assert warning.endswith("after 2 more run(s): only 0 of the cap 10 per object-week left in the week from "
                            "2008-01-28"), warning


def test_a_comparison_is_billed_on_the_weeks_of_its_window(engine, weekly):
    """The candidates of one window together, against the cap of each week the window touches."""
    from tasks import compare
    from tests.integration.test_compare import comparison_spec

    dataset = weekly("week")
    charge(engine, dataset, week(1), 4.0)
    spec = {**comparison_spec(dataset, [{"mechanism": "objtrace", "params": {"cell_size_m": 4000},
                                         "grid": {"epsilon": [3.0, 4.0]}}]),
            "window_start": week(0, offset_days=5)[0].isoformat(), "window_end": week(1, days=1)[1].isoformat()}
    _, planned = compare.parse(spec)  # Saturday of week 0 to Tuesday of week 1: both weeks
    with engine.connect() as conn, pytest.raises(PolicyError, match=r"the candidates together need epsilon-DP "
                                                                   r"epsilon 7 per object-week .* only 3 of the cap "
                                                                   r"10 per object-week left in the week from "
                                                                   r"2008-02-11"):
        compare.bill(conn, planned)
    with engine.connect() as conn:
        bill = compare.bill(conn, planned[:1])
    assert bill.lines()[-1] == ("TOTAL epsilon-DP: epsilon 3 per object over 1 candidate(s) (each charged to the "
                                "weeks its window touches); the most any week holds after them is epsilon 7 (the "
                                "week from 2008-02-11, the ledger included), within the cap 10 per object-week")


def test_a_year_of_weekly_releases_fits_a_per_week_cap(engine, weekly):
    """52 weekly releases at epsilon 5 per object-week under a cap of 10 per object-week: every one is charged
    (the lifetime unit refuses the third), and the lifetime figure they state is what the ledger sums."""
    dataset = weekly("week")
    for k in range(52):
        charge(engine, dataset, week(k), 5.0)
    with engine.connect() as conn:
        acc = governance.accounts(conn, dataset)["epsilon-DP"]
        stated = governance.guarantee_record(conn, dataset, per_object(5.0))["protection"]["statement"]
    assert (acc.spent, acc.releases) == (260.0, 52)
    assert "52 weekly releases like this one: epsilon 260 per object over the year" in stated


@pytest.mark.parametrize("w", [1, 3])
def test_the_forecasts_rule_agrees_with_the_ledgers(engine, weekly, w):
    """The forecast replays the ledger's rule in Python (tasks.forecast.Replay): on random windows (a fixed
    seed) over a random ledger, both refuse exactly the same charges."""
    import random

    from tasks.forecast import Replay

    dataset = weekly("week", w=w)
    rng = random.Random(20260101 + w)
    windows = [week(rng.randrange(12), days=rng.choice([0.5, 1, 3, 7, 10]), offset_days=rng.choice([0, 2.5, 5]))
               for _ in range(40)]
    agreed = {True: 0, False: 0}
    for window in windows:
        epsilon = rng.choice([0.5, 1.0, 2.5, 4.0])
        with engine.connect() as conn:
            mine = Replay.read(conn, dataset, "epsilon-DP").refusal(*window, epsilon)
        try:
            charge(engine, dataset, window, epsilon)
            refused = False
        except PolicyError:
            refused = True
        assert (mine is not None) == refused, (window, epsilon, mine)
        agreed[refused] += 1
    assert agreed[True] >= 5 and agreed[False] >= 5, agreed  # both outcomes were exercised


@pytest.mark.parametrize("value", ["'Infinity'", "'NaN'", "0", "-1"])
def test_a_steward_cannot_set_a_lifetime_cap_that_is_not_positive_and_finite(stewards, bare_dataset, value):
    # sql/031's check, or sql/037's bound on every cap (PostgreSQL checks constraints in the order of their names)
    with stewards["ada"].begin() as conn, pytest.raises(sa.exc.IntegrityError,
                                                        match="datasets_(lifetime_caps_finite|caps_bounded)"):
        conn.execute(sa.text(f"UPDATE governance.datasets SET lifetime_epsilon_cap = {value} WHERE dataset = :d"),
                     {"d": bare_dataset})
    out = cli("budget", "cap", bare_dataset, "inf", "--lifetime", "--steward", "ada")
    assert out.returncode == 1 and "positive finite number" in out.stderr and "Traceback" not in out.stderr


def test_a_given_back_reservation_frees_its_weeks(engine, weekly):
    """A release that fails before its mechanism runs gives its charge back in the weeks it was charged to."""
    dataset = weekly("week")
    charge(engine, dataset, week(0), 5.0)
    failed = charge(engine, dataset, week(0, days=9), 5.0)  # weeks 0 and 1
    with pytest.raises(PolicyError, match="only 0 of its cap 10 left in the week from 2008-02-04"):
        charge(engine, dataset, week(0), 5.0)
    with engine.begin() as conn:
        governance.transition(conn, failed, "failed", "the window was empty")
        assert governance.release_reservation(conn, failed, "the window was empty")
        back = conn.execute(sa.text("SELECT period_first, period_last, unit_epsilon FROM governance.budget_ledger"
                                    " WHERE release_id = :r AND entry_kind = 'release'"), {"r": failed}).one()
    assert tuple(back) == (datetime(2008, 2, 4), datetime(2008, 2, 11), -5.0)
    charge(engine, dataset, week(0), 5.0)
    charge(engine, dataset, week(1), 10.0)


def test_budget_show_fills_the_periods_and_lists_spend_per_past_period(engine, weekly):
    """Each ledger row with the periods it is charged to; `--periods` the spend of each past week, a give-back
    netted, a week between charges listed with nothing spent."""
    dataset = weekly("week")
    first = charge(engine, dataset, week(0), 4.0)
    failed = charge(engine, dataset, week(0, days=9), 3.0)  # weeks 0 and 1, given back below
    third = charge(engine, dataset, week(2), 6.0)
    with engine.begin() as conn:
        governance.transition(conn, failed, "failed", "the window was empty")
        governance.release_reservation(conn, failed, "the window was empty")
    shown = cli("budget", "show", "--dataset", dataset)
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if line.split()[1:3] == [str(third), "charge"])
    assert "object  2008-02-18 00:00:00  2008-02-18 00:00:00" in row, row  # unit, period_first, period_last
    periods = cli("budget", "show", "--dataset", dataset, "--periods")
    assert periods.returncode == 0, periods.stderr
    lines = periods.stdout.splitlines()
    assert lines[1:] == [" epsilon-DP:", *(f"  week from {d}: epsilon 0 spent by 0 release(s); 10 of the cap 10 "
                                          "per object-week left" for d in ("2007-12-31", "2008-01-07", "2008-01-14",
                                                                           "2008-01-21", "2008-01-28"))
                         ] + lines[7:10] + [" epsilon-LDP: nothing charged", " Pufferfish: nothing charged"]
    assert lines[7:10] == [
        f"  week from 2008-02-04: epsilon 4 spent by 1 release(s) ({first}); 6 of the cap 10 per object-week left",
        "  week from 2008-02-11: epsilon 0 spent by 0 release(s); 10 of the cap 10 per object-week left",
        f"  week from 2008-02-18: epsilon 6 spent by 1 release(s) ({third}); 4 of the cap 10 per object-week left"]
    two = cli("budget", "show", "--dataset", dataset, "--periods", "2").stdout.splitlines()
    assert [line.split(":")[0] for line in two if line.startswith("  week")] == ["  week from 2008-02-11",
                                                                                   "  week from 2008-02-18"]
    # a week whose run was skipped for want of data (sql/041) is listed with it, charged nothing
    from tasks import windows
    from trajpub.spec import ReleaseSpec

    quiet = ReleaseSpec.from_dict({"dataset": dataset, "bbox": [115.4, 39.4, 117.6, 41.1], "requested_by": "requester",
                                   "window_start": week(3)[0].isoformat(), "window_end": week(3)[1].isoformat()})
    windows.record_skip(engine, quiet, "skipped: no data in the window", str(uuid.uuid4()))
    after = cli("budget", "show", "--dataset", dataset, "--periods", "2").stdout.splitlines()
    assert after[2].startswith("  week from 2008-02-18: epsilon 6") and after[3].startswith(
        "  week from 2008-02-25: epsilon 0 spent by 0 release(s)"), after
    assert after[-1] == " runs skipped, no data in the window (nothing charged): week from 2008-02-25 (1)", after


def test_a_release_run_is_charged_to_its_weeks_and_states_its_unit(engine, loaded_tdrive, tmp_path):
    """A real run under a per-week unit: the plan charges the weeks its window touches (Saturday 2 to Tuesday
    5 February 2008 in Beijing: the weeks of 28 January and 4 February), `release show` states the unit, and a
    second run on the same weeks is refused in one sentence before it reads anything."""
    from tests.integration.conftest import base_spec, start_release

    dataset = loaded_tdrive("weekly")  # T-Drive: Beijing's zone, recorded at load
    assert cli("budget", "unit", dataset, "object", "--period", "week", "--steward", "ada").returncode == 0
    assert cli("budget", "cap", dataset, "100", "--steward", "ada").returncode == 0
    spec = base_spec(dataset, approval_timeout_s=1, window_start="2008-02-02", window_end="2008-02-05")
    first = start_release(spec, tmp_path)
    assert first.proc.wait(timeout=300) == 0, first.output()
    first.reader.join(timeout=10)
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT period, period_first, period_last, unit_epsilon FROM"
                                   " governance.budget_ledger WHERE release_id = :r"), {"r": first.release_id}).one()
    assert tuple(row) == ("week", datetime(2008, 1, 28), datetime(2008, 2, 4), 70.0)
    shown = cli("release", "show", str(first.release_id)).stdout
    assert "As this release states it: epsilon 70 per object-week; 52 weekly releases like this one: epsilon 3640 " \
           "per object over the year" in shown, shown
    second = start_release(spec, tmp_path)
    assert second.proc.wait(timeout=300) == 1
    second.reader.join(timeout=10)
    assert "has only 30 of its cap 100 left in the week from 2008-01-28" in second.output()
    assert "snapshot:" not in second.output() and "Traceback" not in second.output()
