-- Dropping a dataset (`trajpub dataset drop NAME`, issue 18 item 5): its raw points, sources, quarantine and
-- staging go; its releases, ledger, approvals, withdrawals and lineage stay, and so do the dataset rows that they
-- reference (the ε already spent stays charged if the same people's data is loaded again under the name).
-- Only a steward may drop (the pipeline has no DELETE on raw or staging, and no EXECUTE here), and only when no
-- release of the dataset is published (withdraw it first) or still under way. Each drop is recorded, append-only.
CREATE TABLE IF NOT EXISTS governance.dataset_drops (
    drop_id     bigserial PRIMARY KEY,
    dataset     text NOT NULL REFERENCES governance.datasets(dataset),
    steward     text NOT NULL CHECK (length(steward) > 0),
    n_sources   bigint NOT NULL,
    n_points    bigint NOT NULL,
    dropped_at  timestamptz NOT NULL DEFAULT now()
);
DROP TRIGGER IF EXISTS dataset_drops_append_only ON governance.dataset_drops;
CREATE TRIGGER dataset_drops_append_only BEFORE UPDATE OR DELETE ON governance.dataset_drops
    FOR EACH ROW EXECUTE FUNCTION governance.forbid_change();
REVOKE ALL ON governance.dataset_drops FROM PUBLIC;
GRANT SELECT ON governance.dataset_drops TO trajpub_pipeline, trajpub_steward;

CREATE OR REPLACE FUNCTION governance.drop_dataset(p_dataset text) RETURNS governance.dataset_drops
LANGUAGE plpgsql SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE
    blocking text;
    dropped  dataset_drops;
BEGIN
    -- the same advisory lock as a load into the dataset and a snapshot of it (tasks.db.dataset_lock_key)
    PERFORM pg_advisory_xact_lock(('x' || left(encode(sha256(convert_to('trajpub.dataset.' || p_dataset, 'UTF8')),
                                                      'hex'), 16))::bit(64)::bigint);
    IF NOT EXISTS (SELECT 1 FROM datasets WHERE dataset = p_dataset) THEN
        RAISE EXCEPTION 'there is no dataset ''%''', p_dataset USING ERRCODE = 'TP001';
    END IF;
    SELECT string_agg(format('%s (%s)', release_id, status), ', ' ORDER BY release_id) INTO blocking
      FROM releases WHERE dataset = p_dataset AND status = 'published';
    IF blocking IS NOT NULL THEN
        RAISE EXCEPTION 'dataset ''%'' has published releases: %; withdraw them first (`trajpub withdraw ID`)',
            p_dataset, blocking USING ERRCODE = 'TP001';
    END IF;
    SELECT string_agg(format('%s (%s)', release_id, status), ', ' ORDER BY release_id) INTO blocking
      FROM releases WHERE dataset = p_dataset
       AND status NOT IN ('blocked', 'rejected', 'failed', 'withdrawn');
    IF blocking IS NOT NULL THEN
        RAISE EXCEPTION 'dataset ''%'' has releases under way: %; let them end, reject them or run `trajpub recover`',
            p_dataset, blocking USING ERRCODE = 'TP001';
    END IF;
    DELETE FROM staging.candidate_points WHERE release_id IN (SELECT release_id FROM releases WHERE dataset = p_dataset);
    DELETE FROM staging.candidate_owners WHERE release_id IN (SELECT release_id FROM releases WHERE dataset = p_dataset);
    DELETE FROM staging.candidate_fragments
     WHERE release_id IN (SELECT release_id FROM releases WHERE dataset = p_dataset);
    UPDATE releases SET staging_purged_at = now() WHERE dataset = p_dataset AND staging_purged_at IS NULL;
    DELETE FROM staging.quarantine WHERE dataset = p_dataset;
    INSERT INTO dataset_drops (dataset, steward, n_sources, n_points)
        VALUES (p_dataset, session_user, (SELECT count(*) FROM raw.sources WHERE dataset = p_dataset),
                (SELECT count(*) FROM raw.points WHERE dataset = p_dataset))
        RETURNING * INTO dropped;
    DELETE FROM raw.points WHERE dataset = p_dataset;
    DELETE FROM raw.sources WHERE dataset = p_dataset;
    RETURN dropped;
END $$;
REVOKE ALL ON FUNCTION governance.drop_dataset(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.drop_dataset(text) TO trajpub_steward;

-- What a load did to the file's time order (tasks.load.time_order): objects listed newest-first, put in time
-- order; objects going both forward and back in time, kept in file order for validation to quarantine.
ALTER TABLE raw.sources ADD COLUMN IF NOT EXISTS n_reordered_objects bigint NOT NULL DEFAULT 0,
                        ADD COLUMN IF NOT EXISTS n_unordered_objects bigint NOT NULL DEFAULT 0;
