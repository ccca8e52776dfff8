-- Steward controls and budget bookkeeping (issue: governance you can trust).

-- Withdrawal: a published release can be taken back. Its published tables go; its lineage, approval and
-- ledger entries stay (append-only), and the withdrawal itself is recorded, append-only.
ALTER TABLE governance.releases DROP CONSTRAINT IF EXISTS releases_status_check;
ALTER TABLE governance.releases ADD CONSTRAINT releases_status_check CHECK (status IN (
    'planned', 'validated', 'protected', 'audited', 'blocked', 'awaiting_approval', 'approved', 'rejected',
    'published', 'failed', 'withdrawn'));
CREATE TABLE IF NOT EXISTS governance.withdrawals (
    release_id    bigint PRIMARY KEY REFERENCES governance.releases(release_id),
    steward       text NOT NULL CHECK (length(steward) > 0),
    reason        text NOT NULL CHECK (length(reason) > 0),
    tables        text[] NOT NULL,
    withdrawn_at  timestamptz NOT NULL DEFAULT now()
);
DROP TRIGGER IF EXISTS withdrawals_append_only ON governance.withdrawals;
CREATE TRIGGER withdrawals_append_only BEFORE UPDATE OR DELETE ON governance.withdrawals
    FOR EACH ROW EXECUTE FUNCTION governance.forbid_change();
GRANT SELECT ON governance.withdrawals TO trajpub_pipeline;
GRANT SELECT, INSERT ON governance.withdrawals TO trajpub_steward;
ALTER TABLE governance.lineage_events DROP CONSTRAINT IF EXISTS lineage_events_event_type_check;
ALTER TABLE governance.lineage_events ADD CONSTRAINT lineage_events_event_type_check
    CHECK (event_type IN ('START', 'COMPLETE', 'FAIL', 'ABORT', 'OTHER'));

-- Four-eyes: when a dataset asks for it, the requester of a release cannot approve it (enforced here, for
-- every role and every client, not only by the CLI).
ALTER TABLE governance.datasets ADD COLUMN IF NOT EXISTS four_eyes boolean NOT NULL DEFAULT false;
CREATE OR REPLACE FUNCTION governance.enforce_four_eyes() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
BEGIN
    IF NEW.decision = 'approved' AND EXISTS (
        SELECT 1 FROM governance.releases r JOIN governance.datasets d USING (dataset)
         WHERE r.release_id = NEW.release_id AND d.four_eyes AND r.requested_by = NEW.steward) THEN
        RAISE EXCEPTION 'four-eyes policy: % requested release % and cannot approve it', NEW.steward,
            NEW.release_id USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS approvals_four_eyes ON governance.approvals;
CREATE TRIGGER approvals_four_eyes BEFORE INSERT ON governance.approvals
    FOR EACH ROW EXECUTE FUNCTION governance.enforce_four_eyes();

-- Budget: a δ cap beside the ε cap (sequential composition of both), and the per-object contribution cap
-- each charge was made under (the privacy unit alone does not say how many records one object may add).
ALTER TABLE governance.datasets ADD COLUMN IF NOT EXISTS delta_cap double precision NOT NULL DEFAULT 0
    CHECK (delta_cap >= 0 AND delta_cap < 1);
ALTER TABLE governance.budget_ledger ADD COLUMN IF NOT EXISTS max_records_per_object integer
    CHECK (max_records_per_object IS NULL OR max_records_per_object >= 1);

-- Row triggers do not see TRUNCATE: forbid it too on every append-only table.
DROP TRIGGER IF EXISTS approvals_no_truncate ON governance.approvals;
CREATE TRIGGER approvals_no_truncate BEFORE TRUNCATE ON governance.approvals
    FOR EACH STATEMENT EXECUTE FUNCTION governance.forbid_change();
DROP TRIGGER IF EXISTS ledger_no_truncate ON governance.budget_ledger;
CREATE TRIGGER ledger_no_truncate BEFORE TRUNCATE ON governance.budget_ledger
    FOR EACH STATEMENT EXECUTE FUNCTION governance.forbid_change();
DROP TRIGGER IF EXISTS withdrawals_no_truncate ON governance.withdrawals;
CREATE TRIGGER withdrawals_no_truncate BEFORE TRUNCATE ON governance.withdrawals
    FOR EACH STATEMENT EXECUTE FUNCTION governance.forbid_change();
