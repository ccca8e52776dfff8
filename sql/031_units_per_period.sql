-- Units of protection per period (docs/design.md, "Units of protection per period"): a dataset is accounted per
-- object over its whole life (the default), per object and period (one taxi-week: releases of disjoint periods
-- compose in parallel), or w-event (any w consecutive periods together stay within the cap; Kellaris et al.,
-- VLDB 2014, Def. 3); an optional lifetime cap bounds the sum of every charge. The database holds the ledger per
-- period and checks every cap under the dataset's row lock, so racing releases cannot overspend together.
--
-- Periods are aligned in the dataset's time zone (governance.datasets.timezone, UTC when unknown): days start at
-- local midnight, weeks are ISO weeks from Monday 00:00, months start on the 1st at 00:00. A release's window
-- [window_start, window_end) touches every period from the one holding window_start to the one holding the last
-- instant before window_end, and is charged in full to each of them.

-- 1. The unit: budget_period NULL is the lifetime unit (today's); budget_w the w of w-event privacy (1: per period).
ALTER TABLE governance.datasets ADD COLUMN IF NOT EXISTS budget_period text
    CHECK (budget_period IN ('day', 'week', 'month'));
ALTER TABLE governance.datasets ADD COLUMN IF NOT EXISTS budget_w integer NOT NULL DEFAULT 1
    CHECK (budget_w BETWEEN 1 AND 366);
-- Optional lifetime caps (NULL: none), one per capped account, over the sum of all of an object's charges.
ALTER TABLE governance.datasets ADD COLUMN IF NOT EXISTS lifetime_epsilon_cap double precision;
ALTER TABLE governance.datasets ADD COLUMN IF NOT EXISTS lifetime_ldp_epsilon_cap double precision;
ALTER TABLE governance.datasets ADD COLUMN IF NOT EXISTS lifetime_pufferfish_epsilon_cap double precision;
ALTER TABLE governance.datasets DROP CONSTRAINT IF EXISTS datasets_period_unit_check;
ALTER TABLE governance.datasets ADD CONSTRAINT datasets_period_unit_check CHECK (
    (budget_period IS NULL AND budget_w = 1) OR (budget_period IS NOT NULL AND privacy_unit = 'object'));
ALTER TABLE governance.datasets DROP CONSTRAINT IF EXISTS datasets_lifetime_caps_finite;
ALTER TABLE governance.datasets ADD CONSTRAINT datasets_lifetime_caps_finite CHECK (
    coalesce(lifetime_epsilon_cap > 0 AND lifetime_epsilon_cap < 'Infinity'::float8, true)
    AND coalesce(lifetime_ldp_epsilon_cap > 0 AND lifetime_ldp_epsilon_cap < 'Infinity'::float8, true)
    AND coalesce(lifetime_pufferfish_epsilon_cap > 0 AND lifetime_pufferfish_epsilon_cap < 'Infinity'::float8,
                 true));
GRANT UPDATE (budget_period, budget_w, lifetime_epsilon_cap, lifetime_ldp_epsilon_cap,
              lifetime_pufferfish_epsilon_cap) ON governance.datasets TO trajpub_steward;

-- 2. The periods of a ledger row: the first and last period its release's window touches (local period starts),
-- written by the ledger's trigger from the release's window and the dataset's unit, never by the client. NULL
-- under the lifetime unit.
ALTER TABLE governance.budget_ledger ADD COLUMN IF NOT EXISTS period text
    CHECK (period IN ('day', 'week', 'month'));
ALTER TABLE governance.budget_ledger ADD COLUMN IF NOT EXISTS period_first timestamp;
ALTER TABLE governance.budget_ledger ADD COLUMN IF NOT EXISTS period_last timestamp;
ALTER TABLE governance.budget_ledger DROP CONSTRAINT IF EXISTS budget_ledger_periods_check;
ALTER TABLE governance.budget_ledger ADD CONSTRAINT budget_ledger_periods_check CHECK (
    (period IS NULL AND period_first IS NULL AND period_last IS NULL)
    OR (period IS NOT NULL AND period_first <= period_last));
CREATE INDEX IF NOT EXISTS budget_ledger_dataset_periods ON governance.budget_ledger
    (dataset, account, period_first, period_last);

-- The start (local wall time) of the period holding instant t in zone tz: date_trunc('week') is ISO Monday.
CREATE OR REPLACE FUNCTION governance.period_start(t timestamptz, p_period text, tz text) RETURNS timestamp
LANGUAGE sql STABLE SET search_path = governance, pg_temp AS $$
    SELECT date_trunc(p_period, t AT TIME ZONE coalesce(tz, 'UTC'))
$$;

-- 3. The cap check, for a charge of (epsilon, delta) in one account by a release on [window_start, window_end):
-- NULL when it fits, else the one-sentence reason. Lifetime unit: the sum of the account's charges (sequential
-- composition). Per period / w-event: for every run of w consecutive periods that the window's periods fall in,
-- the charges of the releases touching that run, each once, plus this one (a release touching several periods
-- of one run is one mechanism on that run's data). Then the lifetime cap, if any, over every charge. p_lock
-- holds the dataset's row until commit (the trigger's call), which every charge and every change of unit takes.
DROP FUNCTION IF EXISTS governance.budget_refusal(text, text, double precision, double precision, boolean);
CREATE OR REPLACE FUNCTION governance.budget_refusal(p_dataset text, p_account text, p_epsilon double precision,
                                                     p_delta double precision, p_window_start timestamptz,
                                                     p_window_end timestamptz, p_lock boolean)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = governance, pg_temp
SET extra_float_digits = 0 AS $$
DECLARE
    d record;
    cap double precision;
    lifetime_cap double precision;
    step interval;
    first_p timestamp;
    last_p timestamp;
    worst record;
    spent double precision;
    delta_spent double precision;
    unit_words text;
BEGIN
    IF p_lock THEN
        SELECT * INTO d FROM datasets WHERE dataset = p_dataset FOR UPDATE;
    ELSE
        SELECT * INTO d FROM datasets WHERE dataset = p_dataset;
    END IF;
    IF NOT FOUND THEN
        RETURN format('dataset ''%s'' has not been loaded', p_dataset);
    END IF;
    cap := CASE p_account WHEN 'epsilon-DP' THEN d.epsilon_cap WHEN 'epsilon-LDP' THEN d.ldp_epsilon_cap
                          WHEN 'Pufferfish' THEN d.pufferfish_epsilon_cap END;
    lifetime_cap := CASE p_account WHEN 'epsilon-DP' THEN d.lifetime_epsilon_cap
                                   WHEN 'epsilon-LDP' THEN d.lifetime_ldp_epsilon_cap
                                   WHEN 'Pufferfish' THEN d.lifetime_pufferfish_epsilon_cap END;
    IF cap IS NULL THEN  -- heuristic guarantees are counted, not capped
        RETURN NULL;
    END IF;
    IF p_delta > 0 AND p_account <> 'epsilon-DP' THEN
        RETURN format('this release needs delta %s but the %s account of dataset ''%s'' has no delta cap',
                      p_delta, p_account, p_dataset);
    END IF;
    IF d.budget_period IS NULL THEN
        SELECT coalesce(sum(unit_epsilon), 0), coalesce(sum(unit_delta), 0) INTO spent, delta_spent
          FROM budget_ledger WHERE dataset = p_dataset AND account = p_account;
        IF spent + p_epsilon > cap + 1e-12 THEN
            RETURN format('this release needs %s epsilon %s per %s but dataset ''%s'' has only %s of its cap %s left',
                          p_account, p_epsilon, d.privacy_unit, p_dataset, cap - spent, cap);
        END IF;
        IF p_delta > 0 AND delta_spent + p_delta > d.delta_cap * (1 + 1e-12) THEN
            RETURN format('this release needs delta %s but dataset ''%s'' has only %s of its delta cap %s left',
                          p_delta, p_dataset, greatest(d.delta_cap - delta_spent, 0), d.delta_cap);
        END IF;
    ELSE
        unit_words := 'object-' || d.budget_period;
        IF p_window_start IS NULL OR p_window_end IS NULL THEN
            RETURN format('dataset ''%s'' is accounted per %s, so a release needs a window with both ends '
                          '(window_start and window_end) to know the %ss it reads', p_dataset, unit_words,
                          d.budget_period);
        END IF;
        step := ('1 ' || d.budget_period)::interval;
        first_p := period_start(p_window_start, d.budget_period, d.timezone);
        last_p := period_start(p_window_end - interval '1 microsecond', d.budget_period, d.timezone);
        SELECT s.run_start, coalesce(sum(l.unit_epsilon), 0) AS eps, coalesce(sum(l.unit_delta), 0) AS delta
          INTO worst
          FROM generate_series(first_p - (d.budget_w - 1) * step, last_p, step) AS s(run_start)
          LEFT JOIN budget_ledger l ON l.dataset = p_dataset AND l.account = p_account
               AND l.period_first < s.run_start + d.budget_w * step AND l.period_last >= s.run_start
         GROUP BY s.run_start
         ORDER BY (coalesce(sum(l.unit_epsilon), 0) + p_epsilon > cap + 1e-12) DESC,
                  (p_delta > 0 AND coalesce(sum(l.unit_delta), 0) + p_delta > d.delta_cap * (1 + 1e-12)) DESC,
                  coalesce(sum(l.unit_epsilon), 0) DESC, s.run_start
         LIMIT 1;
        IF worst.eps + p_epsilon > cap + 1e-12 OR
           (p_delta > 0 AND worst.delta + p_delta > d.delta_cap * (1 + 1e-12)) THEN
            RETURN format('this release needs %s epsilon %s%s per %s but dataset ''%s'' has only %s of its cap %s '
                          'left %s', p_account, p_epsilon,
                          CASE WHEN p_delta > 0 THEN format(' and delta %s', p_delta) ELSE '' END,
                          unit_words, p_dataset,
                          CASE WHEN worst.eps + p_epsilon > cap + 1e-12 THEN (cap - worst.eps)::text
                               ELSE format('delta %s', greatest(d.delta_cap - worst.delta, 0)) END,
                          CASE WHEN worst.eps + p_epsilon > cap + 1e-12 THEN cap::text
                               ELSE format('delta %s', d.delta_cap) END,
                          CASE WHEN d.budget_w = 1
                               THEN format('in the %s from %s', d.budget_period, worst.run_start::date)
                               ELSE format('over the %s %ss from %s (w-event)', d.budget_w, d.budget_period,
                                           worst.run_start::date) END);
        END IF;
    END IF;
    IF lifetime_cap IS NOT NULL THEN
        SELECT coalesce(sum(unit_epsilon), 0) INTO spent
          FROM budget_ledger WHERE dataset = p_dataset AND account = p_account;
        IF spent + p_epsilon > lifetime_cap + 1e-12 THEN
            RETURN format('this release needs %s epsilon %s but dataset ''%s'' has only %s of its lifetime cap %s '
                          'per object left', p_account, p_epsilon, p_dataset, lifetime_cap - spent, lifetime_cap);
        END IF;
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION governance.budget_refusal(text, text, double precision, double precision, timestamptz,
                                                 timestamptz, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.budget_refusal(text, text, double precision, double precision, timestamptz,
                                                    timestamptz, boolean) TO trajpub_pipeline, trajpub_steward;

-- 4. The ledger's trigger: the row's periods from its release's window (a give-back gets its charge's, so they
-- cancel period by period), then the caps for a charge.
CREATE OR REPLACE FUNCTION governance.enforce_budget_cap() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE
    refusal text;
    d record;
    rel record;
BEGIN
    -- the row lock first: a change of unit waits for this charge (and this charge for it), so the periods
    -- written and the caps checked are of one unit
    SELECT budget_period, timezone INTO d FROM datasets WHERE dataset = NEW.dataset FOR UPDATE;
    SELECT window_start, window_end INTO rel FROM releases WHERE release_id = NEW.release_id;
    NEW.period := d.budget_period;
    NEW.period_first := NULL;
    NEW.period_last := NULL;
    IF d.budget_period IS NOT NULL AND rel.window_start IS NOT NULL AND rel.window_end IS NOT NULL THEN
        NEW.period_first := period_start(rel.window_start, d.budget_period, d.timezone);
        NEW.period_last := period_start(rel.window_end - interval '1 microsecond', d.budget_period, d.timezone);
    END IF;
    IF NEW.entry_kind <> 'charge' OR NEW.unit_epsilon IS NULL THEN  -- a reservation given back spends nothing;
        RETURN NEW;                                                   -- a heuristic guarantee spends no epsilon
    END IF;
    refusal := budget_refusal(NEW.dataset, NEW.account, NEW.unit_epsilon, coalesce(NEW.unit_delta, 0),
                              rel.window_start, rel.window_end, true);
    IF refusal IS NOT NULL THEN
        RAISE EXCEPTION '%', refusal USING ERRCODE = 'TP001';
    END IF;
    RETURN NEW;
END $$;

-- 5. The unit (object or record, the period, w) and the zone that aligns the periods change only while the
-- dataset's ledger is empty (enforce_unit_under_charges, sql/026, counts its rows).
DROP TRIGGER IF EXISTS datasets_unit_under_charges ON governance.datasets;
CREATE TRIGGER datasets_unit_under_charges BEFORE UPDATE OF privacy_unit, budget_period, budget_w, timezone
    ON governance.datasets FOR EACH ROW
    WHEN ((OLD.privacy_unit, OLD.budget_period, OLD.budget_w, OLD.timezone) IS DISTINCT FROM
          (NEW.privacy_unit, NEW.budget_period, NEW.budget_w, NEW.timezone))
    EXECUTE FUNCTION governance.enforce_unit_under_charges();
