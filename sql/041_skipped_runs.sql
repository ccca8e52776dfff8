-- A run whose window holds no data is skipped, not failed (docs/operations.md, "Re-run and backfill"): nothing is
-- planned, read or charged, and no release exists for it. The skip is recorded here, append-only, so that a
-- steward sees that the week was skipped, not lost (`trajpub budget show --periods` lists it with its period).
CREATE TABLE IF NOT EXISTS governance.skipped_runs (
    flow_run_id   uuid PRIMARY KEY,
    dataset       text NOT NULL,
    window_start  timestamptz NOT NULL,
    window_end    timestamptz NOT NULL,
    requested_by  text,
    reason        text NOT NULL,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT skipped_runs_window CHECK (window_start < window_end)
);
CREATE INDEX IF NOT EXISTS skipped_runs_dataset ON governance.skipped_runs (dataset, window_start);
GRANT SELECT, INSERT ON governance.skipped_runs TO trajpub_pipeline;
GRANT SELECT ON governance.skipped_runs TO trajpub_steward;
