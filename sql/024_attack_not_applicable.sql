-- An attack that cannot measure a release (home/work inference on a window without night hours, or on a release
-- without timestamps) is neither a failure nor a risk of zero: it is recorded as 'not applicable' with its reason
-- in error, and passed says what the gate policy's when_not_applicable made of it (issue 18, item 5). The
-- consumer's card shows the outcome next to the verdict, so "passed" never reads as "measured and low".
ALTER TABLE governance.audit_results ADD COLUMN IF NOT EXISTS outcome text NOT NULL DEFAULT 'measured';
UPDATE governance.audit_results SET outcome = 'failed' WHERE error IS NOT NULL AND outcome = 'measured';
ALTER TABLE governance.audit_results DROP CONSTRAINT IF EXISTS audit_results_outcome;
ALTER TABLE governance.audit_results ADD CONSTRAINT audit_results_outcome
    CHECK (outcome IN ('measured', 'failed', 'not applicable') AND (outcome = 'measured') = (error IS NULL)
           AND (outcome <> 'failed' OR NOT passed));

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
       (SELECT jsonb_agg(jsonb_build_object('attack', x.attack, 'resolution_m', NULLIF(x.resolution_m, 0),
                                            'outcome', x.outcome, 'passed', x.passed)
                         ORDER BY x.attack, x.resolution_m)
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
