-- Weeks as the dataset's city counts them (docs/operations.md, "Data and budgets"): a dataset records the first
-- day of its week (governance.datasets.week_start, Monday by default, the ISO week of sql/031). A per-week unit of
-- protection counts its periods from that day's local 00:00, and a relative window `align: local_week` ends on it
-- unless the spec names another (trajpub/window.py). Before, every week was an ISO week: a Sunday-to-Saturday
-- release touched two object-weeks and was charged to both.

ALTER TABLE governance.datasets ADD COLUMN IF NOT EXISTS week_start text NOT NULL DEFAULT 'monday';
ALTER TABLE governance.datasets DROP CONSTRAINT IF EXISTS datasets_week_start_check;
ALTER TABLE governance.datasets ADD CONSTRAINT datasets_week_start_check CHECK (week_start IN
    ('monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'));
GRANT UPDATE (week_start) ON governance.datasets TO trajpub_steward;

-- The start (local wall time) of the period holding instant t in zone tz, a week starting on p_week_start.
CREATE OR REPLACE FUNCTION governance.period_start(t timestamptz, p_period text, tz text, p_week_start text)
RETURNS timestamp LANGUAGE sql STABLE SET search_path = governance, pg_temp AS $$
    SELECT CASE WHEN p_period = 'week' THEN
        date_trunc('day', t AT TIME ZONE coalesce(tz, 'UTC')) - make_interval(days => (
            extract(isodow FROM t AT TIME ZONE coalesce(tz, 'UTC'))::int
            - array_position(ARRAY['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'],
                             coalesce(p_week_start, 'monday')) + 7) % 7)
    ELSE date_trunc(p_period, t AT TIME ZONE coalesce(tz, 'UTC')) END
$$;

-- The cap check and the ledger's trigger (sql/031) call the week-aware period_start with the dataset's week start:
-- their definitions are rewritten in place at exactly those calls (and the trigger reads the column), nothing else
-- changes. Idempotent: a definition already rewritten is left as it is.
DO $$
DECLARE
    fn text;
    def text;
BEGIN
    FOREACH fn IN ARRAY ARRAY['governance.budget_refusal(text, text, double precision, double precision, '
                              'timestamptz, timestamptz, boolean)', 'governance.enforce_budget_cap()'] LOOP
        def := pg_get_functiondef(fn::regprocedure);
        IF position('d.week_start' IN def) = 0 THEN
            def := replace(def, 'd.budget_period, d.timezone)', 'd.budget_period, d.timezone, d.week_start)');
            def := replace(def, 'SELECT budget_period, timezone INTO d', 'SELECT budget_period, timezone, week_start INTO d');
            EXECUTE def;
        END IF;
    END LOOP;
END $$;

-- The week start aligns the periods: it changes only while the dataset's ledger is empty, as the unit does.
DROP TRIGGER IF EXISTS datasets_unit_under_charges ON governance.datasets;
CREATE TRIGGER datasets_unit_under_charges BEFORE UPDATE OF privacy_unit, budget_period, budget_w, timezone, week_start
    ON governance.datasets FOR EACH ROW
    WHEN ((OLD.privacy_unit, OLD.budget_period, OLD.budget_w, OLD.timezone, OLD.week_start) IS DISTINCT FROM
          (NEW.privacy_unit, NEW.budget_period, NEW.budget_w, NEW.timezone, NEW.week_start))
    EXECUTE FUNCTION governance.enforce_unit_under_charges();
