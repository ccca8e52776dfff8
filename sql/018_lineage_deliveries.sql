-- Which stored lineage events reached the configured OpenLineage transport (tasks/lineage.py: deliver). The
-- events table is the outbox; a delivery is recorded once, after the transport took the event.
CREATE TABLE IF NOT EXISTS governance.lineage_deliveries (
    event_id     bigint PRIMARY KEY REFERENCES governance.lineage_events (event_id),
    transport    text NOT NULL,
    delivered_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON governance.lineage_deliveries TO trajpub_pipeline, trajpub_steward;
