-- The current definition of every view, in one place: `trajpub db migrate` runs this file after the numbered
-- migrations whenever it changed (its digest is kept in governance.repeatable_migrations) or a numbered migration
-- was applied, in one transaction. To change a view, edit it here; a numbered migration changes tables only.
-- Each view is dropped and created again (CREATE OR REPLACE cannot drop or rename a column), then granted; the
-- drop does not cascade, so an object built on a view stops the migration instead of vanishing with it.

-- What a consumer may know of a published release: who approved it, under which guarantee, how the attacks and
-- the utility floor came out (verdicts only: no raw figure), and the lineage run.
DROP VIEW IF EXISTS published.release_lineage;
CREATE VIEW published.release_lineage AS
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
         WHERE u.verdict ? 'status')                   AS utility_verdict,
       r.summary ->> 'shape'                           AS shape  -- the export reads each shape as the shape says
  FROM governance.releases r
  JOIN governance.approvals a ON a.release_id = r.release_id AND a.decision = 'approved'
  JOIN governance.lineage_events e ON e.release_id = r.release_id AND e.event_type = 'COMPLETE'
 WHERE r.status = 'published';
REVOKE ALL ON published.release_lineage FROM PUBLIC;
GRANT SELECT ON published.release_lineage TO trajpub_consumer, trajpub_pipeline, trajpub_steward;
