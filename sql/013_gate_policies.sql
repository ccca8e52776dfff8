-- Gate policies belong to the dataset (issue 16, item 1): stewards register versions of named policies and
-- set which one gates a dataset; a release spec may only name a registered policy that is at least as strict.
-- Both tables are append-only: a policy version never changes, and a dataset's policy history stays.
CREATE TABLE IF NOT EXISTS governance.gate_policies (
    name           text NOT NULL CHECK (name ~ '^[a-z][a-z0-9_]{0,39}$'),
    version        integer NOT NULL CHECK (version >= 1),
    policy         jsonb NOT NULL,
    registered_by  text NOT NULL CHECK (length(registered_by) > 0),
    registered_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, version)
);

CREATE TABLE IF NOT EXISTS governance.dataset_policies (
    entry_id        bigserial PRIMARY KEY,
    dataset         text NOT NULL REFERENCES governance.datasets(dataset),
    policy_name     text NOT NULL,
    policy_version  integer NOT NULL,
    set_by          text NOT NULL CHECK (length(set_by) > 0),
    set_at          timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (policy_name, policy_version) REFERENCES governance.gate_policies(name, version)
);
CREATE INDEX IF NOT EXISTS dataset_policies_dataset_idx ON governance.dataset_policies (dataset, entry_id);

DROP TRIGGER IF EXISTS gate_policies_append_only ON governance.gate_policies;
CREATE TRIGGER gate_policies_append_only BEFORE UPDATE OR DELETE ON governance.gate_policies
    FOR EACH ROW EXECUTE FUNCTION governance.forbid_change();
DROP TRIGGER IF EXISTS gate_policies_no_truncate ON governance.gate_policies;
CREATE TRIGGER gate_policies_no_truncate BEFORE TRUNCATE ON governance.gate_policies
    FOR EACH STATEMENT EXECUTE FUNCTION governance.forbid_change();
DROP TRIGGER IF EXISTS dataset_policies_append_only ON governance.dataset_policies;
CREATE TRIGGER dataset_policies_append_only BEFORE UPDATE OR DELETE ON governance.dataset_policies
    FOR EACH ROW EXECUTE FUNCTION governance.forbid_change();
DROP TRIGGER IF EXISTS dataset_policies_no_truncate ON governance.dataset_policies;
CREATE TRIGGER dataset_policies_no_truncate BEFORE TRUNCATE ON governance.dataset_policies
    FOR EACH STATEMENT EXECUTE FUNCTION governance.forbid_change();

-- The pipeline may only adopt the shipped default for a dataset that has no policy yet (its first release);
-- registering and setting policies is the steward's.
CREATE OR REPLACE FUNCTION governance.adopt_default_policy(p_dataset text, p_policy jsonb) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE
    v integer;
BEGIN
    -- one adoption per dataset at a time (not the dataset's row lock, which the budget reservation holds)
    PERFORM pg_advisory_xact_lock(hashtext('trajpub.gate_policy.' || p_dataset));
    IF EXISTS (SELECT 1 FROM governance.dataset_policies WHERE dataset = p_dataset) THEN
        RETURN NULL;
    END IF;
    SELECT version INTO v FROM governance.gate_policies
     WHERE name = 'default' AND policy - 'version' = p_policy - 'version' ORDER BY version DESC LIMIT 1;
    IF v IS NULL THEN
        SELECT coalesce(max(version), 0) + 1 INTO v FROM governance.gate_policies WHERE name = 'default';
        INSERT INTO governance.gate_policies (name, version, policy, registered_by)
        VALUES ('default', v, jsonb_set(p_policy, '{version}', to_jsonb(v)), 'trajpub (shipped default)');
    END IF;
    INSERT INTO governance.dataset_policies (dataset, policy_name, policy_version, set_by)
    VALUES (p_dataset, 'default', v, 'trajpub (shipped default, first release)');
    RETURN v;
END $$;
REVOKE ALL ON FUNCTION governance.adopt_default_policy(text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.adopt_default_policy(text, jsonb) TO trajpub_pipeline;

GRANT SELECT ON governance.gate_policies, governance.dataset_policies TO trajpub_pipeline, trajpub_steward;
GRANT INSERT ON governance.gate_policies, governance.dataset_policies TO trajpub_steward;
GRANT USAGE ON SEQUENCE governance.dataset_policies_entry_id_seq TO trajpub_steward;

-- The budget is reserved at plan, before any data is read (item 6): the ledger row is written then, and a
-- release that fails before its mechanism runs gets a compensating 'release' row (the ledger stays
-- append-only). mechanism_started_at says when the mechanism was given the data: from then on ε is spent.
ALTER TABLE governance.releases ADD COLUMN IF NOT EXISTS mechanism_started_at timestamptz;
ALTER TABLE governance.budget_ledger ADD COLUMN IF NOT EXISTS entry_kind text NOT NULL DEFAULT 'charge'
    CHECK (entry_kind IN ('charge', 'release'));
ALTER TABLE governance.budget_ledger ADD COLUMN IF NOT EXISTS reason text;
ALTER TABLE governance.budget_ledger DROP CONSTRAINT IF EXISTS budget_ledger_release_id_key;
ALTER TABLE governance.budget_ledger DROP CONSTRAINT IF EXISTS budget_ledger_epsilon_check;
ALTER TABLE governance.budget_ledger DROP CONSTRAINT IF EXISTS budget_ledger_delta_check;
ALTER TABLE governance.budget_ledger DROP CONSTRAINT IF EXISTS budget_ledger_sign_check;
ALTER TABLE governance.budget_ledger ADD CONSTRAINT budget_ledger_sign_check CHECK (
    (entry_kind = 'charge' AND epsilon >= 0 AND delta >= 0) OR (entry_kind = 'release' AND epsilon <= 0 AND delta <= 0));
ALTER TABLE governance.budget_ledger DROP CONSTRAINT IF EXISTS budget_ledger_one_entry_kind;
ALTER TABLE governance.budget_ledger ADD CONSTRAINT budget_ledger_one_entry_kind UNIQUE (release_id, entry_kind);
-- a reservation is released only for a release whose mechanism never ran, and by no more than it reserved
CREATE OR REPLACE FUNCTION governance.check_ledger_release() RETURNS trigger LANGUAGE plpgsql
SET search_path = governance, pg_temp AS $$
BEGIN
    IF NEW.entry_kind = 'release' AND NOT EXISTS (
        SELECT 1 FROM governance.budget_ledger c JOIN governance.releases r USING (release_id)
         WHERE c.release_id = NEW.release_id AND c.entry_kind = 'charge' AND r.mechanism_started_at IS NULL
           AND c.epsilon = -NEW.epsilon AND c.delta = -NEW.delta) THEN
        RAISE EXCEPTION 'release % cannot give its budget back: its mechanism ran, or it reserved a different amount',
            NEW.release_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS ledger_release_check ON governance.budget_ledger;
CREATE TRIGGER ledger_release_check BEFORE INSERT ON governance.budget_ledger
    FOR EACH ROW EXECUTE FUNCTION governance.check_ledger_release();
