-- The consumer's release card lists each attack once per cell size it ran at (issue 14, item 4: the gate runs
-- the grid-based attacks at every resolution of its policy). Before, it listed {attack, passed} once per row of
-- governance.audit_results, i.e. identical-looking copies of a grid attack, one per resolution. resolution_m is
-- the policy's cell size (NULL for an attack that reads no grid), a public parameter; verdicts only, no figures.
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
                                            'passed', x.passed) ORDER BY x.attack, x.resolution_m)
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
