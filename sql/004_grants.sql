-- Grants: the pipeline owns the data path, the steward decides, the consumer reads `published` only.
GRANT USAGE ON SCHEMA raw, staging, published, governance TO trajpub_pipeline;
GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA raw, staging TO trajpub_pipeline;
GRANT SELECT, INSERT, UPDATE ON governance.releases, governance.datasets TO trajpub_pipeline;
GRANT SELECT, INSERT ON governance.release_transitions, governance.validation_results,
    governance.audit_results, governance.budget_ledger, governance.lineage_events TO trajpub_pipeline;
GRANT SELECT ON governance.approvals TO trajpub_pipeline;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA raw, staging, governance TO trajpub_pipeline;
GRANT CREATE ON SCHEMA published TO trajpub_pipeline;

GRANT USAGE ON SCHEMA governance TO trajpub_steward;
GRANT SELECT ON ALL TABLES IN SCHEMA governance TO trajpub_steward;
GRANT INSERT ON governance.approvals TO trajpub_steward;
GRANT USAGE ON SEQUENCE governance.approvals_approval_id_seq TO trajpub_steward;

GRANT USAGE ON SCHEMA published TO trajpub_consumer;
ALTER DEFAULT PRIVILEGES IN SCHEMA published GRANT SELECT ON TABLES TO trajpub_consumer;
GRANT SELECT ON ALL TABLES IN SCHEMA published TO trajpub_consumer;
-- PostGIS functions live in `public`; the consumer needs them to read geometry, nothing more.
GRANT USAGE ON SCHEMA public TO trajpub_consumer, trajpub_steward, trajpub_pipeline;
