-- The consumer's release card gains the lineage run id (the OpenLineage runId of the publishing run) and the
-- utility verdict: per gated metric its ceiling and whether the release met it, never the measured value (a
-- figure computed on the raw data).
CREATE OR REPLACE VIEW published.release_lineage AS
SELECT r.release_id,
       r.dataset,
       r.published_table,
       r.mechanism,
       r.params                                        AS parameters,
       r.guarantee,
       a.steward                                       AS approved_by,
       a.decided_at                                    AS approved_at,
       e.event -> 'run' -> 'facets' -> 'code_version' ->> 'version' AS code_version,
       e.event_time                                    AS published_at,
       (SELECT jsonb_agg(jsonb_build_object('attack', x.attack, 'passed', x.passed) ORDER BY x.attack)
          FROM governance.audit_results x WHERE x.release_id = r.release_id) AS audits,
       e.event -> 'run' ->> 'runId'                    AS lineage_run_id,
       (SELECT jsonb_object_agg(u.metric, u.verdict - 'value')
          FROM jsonb_each(r.summary -> 'gate' -> 'per_utility') AS u(metric, verdict)
         WHERE u.verdict ? 'status')                   AS utility_verdict
  FROM governance.releases r
  JOIN governance.approvals a ON a.release_id = r.release_id AND a.decision = 'approved'
  JOIN governance.lineage_events e ON e.release_id = r.release_id AND e.event_type = 'COMPLETE'
 WHERE r.status = 'published';
GRANT SELECT ON published.release_lineage TO trajpub_consumer;
