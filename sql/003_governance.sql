-- Releases (a status machine), validation and audit results, approvals, the privacy-budget ledger, lineage.
CREATE TABLE IF NOT EXISTS governance.datasets (
    dataset        text PRIMARY KEY REFERENCES raw.datasets(dataset),
    epsilon_cap    double precision NOT NULL DEFAULT 10.0 CHECK (epsilon_cap > 0),
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS governance.releases (
    release_id       bigserial PRIMARY KEY,
    dataset          text NOT NULL REFERENCES governance.datasets(dataset),
    status           text NOT NULL DEFAULT 'planned' CHECK (status IN (
                        'planned', 'validated', 'protected', 'audited', 'blocked',
                        'awaiting_approval', 'approved', 'rejected', 'published', 'failed')),
    mechanism        text NOT NULL,
    params           jsonb NOT NULL,
    spec             jsonb NOT NULL,
    requested_by     text NOT NULL,
    flow_run_id      uuid,
    window_start     timestamptz,
    window_end       timestamptz,
    snapshot_hash    text,
    snapshot_points  bigint,
    guarantee        jsonb,
    summary          jsonb NOT NULL DEFAULT '{}'::jsonb,
    published_table  text,
    failure_reason   text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS governance.release_transitions (
    release_id   bigint NOT NULL REFERENCES governance.releases(release_id),
    from_status  text,
    to_status    text NOT NULL,
    detail       text,
    at           timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE IF NOT EXISTS governance.validation_results (
    release_id     bigint NOT NULL REFERENCES governance.releases(release_id),
    suite          text NOT NULL,
    success        boolean NOT NULL,
    n_rows         bigint NOT NULL,
    n_quarantined  bigint NOT NULL,
    result         jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, suite)
);

CREATE TABLE IF NOT EXISTS governance.audit_results (
    release_id    bigint NOT NULL REFERENCES governance.releases(release_id),
    attack        text NOT NULL,
    success_rate  double precision NOT NULL,
    ci_low        double precision NOT NULL,
    ci_high       double precision NOT NULL,
    baseline      double precision NOT NULL,
    risk          double precision NOT NULL,
    threshold     double precision,             -- NULL when the policy sets none (not gated)
    passed        boolean NOT NULL,
    evidence      jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (release_id, attack)
);

CREATE TABLE IF NOT EXISTS governance.approvals (
    approval_id  bigserial PRIMARY KEY,
    release_id   bigint NOT NULL REFERENCES governance.releases(release_id),
    decision     text NOT NULL CHECK (decision IN ('approved', 'rejected')),
    steward      text NOT NULL CHECK (length(steward) > 0),
    comment      text,
    decided_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (release_id)
);

CREATE TABLE IF NOT EXISTS governance.budget_ledger (
    entry_id       bigserial PRIMARY KEY,
    dataset        text NOT NULL REFERENCES governance.datasets(dataset),
    release_id     bigint NOT NULL REFERENCES governance.releases(release_id),
    mechanism      text NOT NULL,
    epsilon        double precision NOT NULL CHECK (epsilon >= 0),
    delta          double precision NOT NULL DEFAULT 0 CHECK (delta >= 0),
    privacy_unit   text NOT NULL,
    charged_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (release_id)
);

CREATE TABLE IF NOT EXISTS governance.lineage_events (
    event_id     bigserial PRIMARY KEY,
    release_id   bigint NOT NULL REFERENCES governance.releases(release_id),
    event_type   text NOT NULL CHECK (event_type IN ('START', 'COMPLETE', 'FAIL', 'ABORT')),
    event_time   timestamptz NOT NULL DEFAULT clock_timestamp(),
    event        jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS lineage_release_idx ON governance.lineage_events (release_id);

-- Approvals and ledger entries are append-only for every role, the owner included.
CREATE OR REPLACE FUNCTION governance.forbid_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% on governance.% is not allowed: the table is append-only', TG_OP, TG_TABLE_NAME;
END
$$;
DROP TRIGGER IF EXISTS approvals_append_only ON governance.approvals;
CREATE TRIGGER approvals_append_only BEFORE UPDATE OR DELETE ON governance.approvals
    FOR EACH ROW EXECUTE FUNCTION governance.forbid_change();
DROP TRIGGER IF EXISTS ledger_append_only ON governance.budget_ledger;
CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON governance.budget_ledger
    FOR EACH ROW EXECUTE FUNCTION governance.forbid_change();
