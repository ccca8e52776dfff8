-- Count people, not records (issue 14): one declared unit of protection per dataset, a ledger in that unit with
-- one account per privacy model, the adversary's resolutions in the audit results, and staging retention.

-- The unit every release of a dataset is accounted in: the object (a person, a vehicle: all its records) by
-- default, or one trajectory record when the owner says so (`trajpub budget unit`).
ALTER TABLE governance.datasets ADD COLUMN IF NOT EXISTS privacy_unit text NOT NULL DEFAULT 'object'
    CHECK (privacy_unit IN ('object', 'record'));
-- One cap per model: epsilon_cap / delta_cap stay the epsilon-DP caps; epsilon-LDP and Pufferfish have their own.
ALTER TABLE governance.datasets ADD COLUMN IF NOT EXISTS ldp_epsilon_cap double precision NOT NULL DEFAULT 10.0
    CHECK (ldp_epsilon_cap > 0);
ALTER TABLE governance.datasets ADD COLUMN IF NOT EXISTS pufferfish_epsilon_cap double precision NOT NULL
    DEFAULT 10.0 CHECK (pufferfish_epsilon_cap > 0);
-- How long (days) the candidate points and private owner keys of an ended release stay in staging: 0 deletes
-- them when the release ends; a steward who needs the evidence longer sets more (`trajpub retention`).
ALTER TABLE governance.datasets ADD COLUMN IF NOT EXISTS staging_retention_days integer NOT NULL DEFAULT 0
    CHECK (staging_retention_days >= 0);

-- The ledger in the dataset's unit: `epsilon`/`delta` stay the mechanism's own figures (per its privacy_unit);
-- `unit_epsilon`/`unit_delta` are what the account is charged, `account` the currency, `conversion` how.
-- unit_epsilon is NULL for heuristic guarantees and for rows that cannot be converted (conversion says so).
ALTER TABLE governance.budget_ledger ADD COLUMN IF NOT EXISTS account text
    CHECK (account IN ('epsilon-DP', 'epsilon-LDP', 'Pufferfish', 'heuristic'));
ALTER TABLE governance.budget_ledger ADD COLUMN IF NOT EXISTS unit text CHECK (unit IN ('object', 'record'));
ALTER TABLE governance.budget_ledger ADD COLUMN IF NOT EXISTS unit_epsilon double precision;
ALTER TABLE governance.budget_ledger ADD COLUMN IF NOT EXISTS unit_delta double precision;
ALTER TABLE governance.budget_ledger ADD COLUMN IF NOT EXISTS conversion text;
-- a charge is positive, a given-back reservation (entry_kind 'release', migration 013) negative
ALTER TABLE governance.budget_ledger DROP CONSTRAINT IF EXISTS budget_ledger_unit_sign_check;
ALTER TABLE governance.budget_ledger ADD CONSTRAINT budget_ledger_unit_sign_check CHECK (
    (entry_kind = 'charge' AND coalesce(unit_epsilon, 0) >= 0 AND coalesce(unit_delta, 0) >= 0) OR
    (entry_kind = 'release' AND coalesce(unit_epsilon, 0) <= 0 AND coalesce(unit_delta, 0) <= 0));

-- Existing rows, converted once and honestly (the append-only trigger is lifted for this statement only):
-- per-record epsilon-DP x the records-per-object cap recorded with the charge (group privacy, delta = 0 for
-- every mechanism charged so far); per-object Pufferfish as it is; heuristic guarantees spend nothing; anything
-- else (per-record epsilon-DP without a recorded cap, per-trajectory epsilon-LDP) is marked unconvertible, and
-- its account refuses new charges until the owner resolves it.
ALTER TABLE governance.budget_ledger DISABLE TRIGGER ledger_append_only;
UPDATE governance.budget_ledger l SET
    unit = 'object',
    account = CASE
        WHEN r.guarantee->>'epsilon' IS NULL OR r.guarantee->>'model' NOT LIKE 'epsilon-%' AND
             r.guarantee->>'model' NOT LIKE '%Pufferfish%' THEN 'heuristic'
        WHEN r.guarantee->>'model' LIKE '%Pufferfish%' THEN 'Pufferfish'
        WHEN r.guarantee->>'model' LIKE 'epsilon-LDP%' THEN 'epsilon-LDP'
        ELSE 'epsilon-DP' END,
    unit_epsilon = CASE
        WHEN r.guarantee->>'epsilon' IS NULL THEN NULL
        WHEN r.guarantee->>'model' LIKE '%Pufferfish%' THEN l.epsilon
        WHEN r.guarantee->>'model' LIKE 'epsilon-DP%' AND l.max_records_per_object IS NOT NULL AND l.delta = 0
            THEN l.epsilon * l.max_records_per_object
        ELSE NULL END,
    unit_delta = CASE WHEN r.guarantee->>'epsilon' IS NULL THEN 0
        WHEN r.guarantee->>'model' LIKE '%Pufferfish%' THEN l.delta
        WHEN r.guarantee->>'model' LIKE 'epsilon-DP%' AND l.max_records_per_object IS NOT NULL AND l.delta = 0
            THEN l.delta ELSE NULL END,
    conversion = CASE
        WHEN r.guarantee->>'epsilon' IS NULL THEN 'migrated: not DP (a heuristic guarantee spends no epsilon)'
        WHEN r.guarantee->>'model' LIKE '%Pufferfish%' THEN 'migrated: per-object Pufferfish epsilon as charged'
        WHEN r.guarantee->>'model' LIKE 'epsilon-DP%' AND l.max_records_per_object IS NOT NULL AND l.delta = 0
            THEN format('migrated: group privacy: %s records per object x epsilon %s', l.max_records_per_object,
                        l.epsilon)
        ELSE 'unconvertible: the charge was per ' || l.privacy_unit || ' and no records-per-object cap was recorded'
        END
  FROM governance.releases r
 WHERE r.release_id = l.release_id AND l.account IS NULL;
ALTER TABLE governance.budget_ledger ENABLE TRIGGER ledger_append_only;
ALTER TABLE governance.budget_ledger ALTER COLUMN account SET NOT NULL;
ALTER TABLE governance.budget_ledger ALTER COLUMN unit SET NOT NULL;
ALTER TABLE governance.budget_ledger ALTER COLUMN conversion SET NOT NULL;

-- The adversary picks the resolution: a grid-based attack runs at every cell size of the gate policy and is
-- stored once per resolution (0 = an attack that reads no grid).
ALTER TABLE governance.audit_results ADD COLUMN IF NOT EXISTS resolution_m double precision NOT NULL DEFAULT 0
    CHECK (resolution_m >= 0);
ALTER TABLE governance.audit_results DROP CONSTRAINT IF EXISTS audit_results_pkey;
ALTER TABLE governance.audit_results ADD PRIMARY KEY (release_id, attack, resolution_m);

-- Staging retention: the pipeline deletes an ended release's candidate rows.
GRANT DELETE ON staging.candidate_points, staging.candidate_owners, staging.candidate_fragments TO trajpub_pipeline;
-- When the candidate rows of a release were deleted (NULL: still held).
ALTER TABLE governance.releases ADD COLUMN IF NOT EXISTS staging_purged_at timestamptz;
