-- What a consumer may know about a published table: mechanism, parameters, guarantee, approver, code version.
-- Exact statistics of the raw data (row counts, content hash, attack success rates) stay in governance: the
-- DP guarantee assumes no deterministic statistic of the raw database is released (Chen et al. Sec. IV-C).
-- The view runs with its owner's rights, so the consumer reads it without reading governance.
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
          FROM governance.audit_results x WHERE x.release_id = r.release_id) AS audits
  FROM governance.releases r
  JOIN governance.approvals a ON a.release_id = r.release_id AND a.decision = 'approved'
  JOIN governance.lineage_events e ON e.release_id = r.release_id AND e.event_type = 'COMPLETE'
 WHERE r.status = 'published';
GRANT SELECT ON published.release_lineage TO trajpub_consumer;
