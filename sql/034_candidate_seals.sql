-- The audited candidate and the published rows are one and the same (docs/design.md, "Sealed candidates").
-- When a candidate is staged, in the same transaction, its row count and a content digest of its staged rows
-- are recorded in governance.candidate_seals (append-only and hash-chained, as the ledger and approvals); when a
-- release becomes published, the digest is computed again from the staged rows and a candidate that changed
-- since (an edited, added or removed row) refuses the publication: nothing is published.

-- The digest: SHA-256 chained over the rows in key order, each row as its text (times in UTC, floats exact,
-- geometries as EWKB hex, whatever the session's settings), so the same rows give the same digest.
CREATE OR REPLACE FUNCTION governance.sha256_step(state bytea, item bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT sha256(state || item) $$;
CREATE OR REPLACE AGGREGATE governance.sha256_chain(bytea) (
    SFUNC = governance.sha256_step, STYPE = bytea, INITCOND = ''
);

-- {rows, hash} of the staged candidate of p_release: its points (traj_id, seq order) and its fragments
-- (fragment_id order); a release has one or the other. The private owner table is not part of what is published.
CREATE OR REPLACE FUNCTION governance.candidate_digest(p_release bigint) RETURNS jsonb LANGUAGE plpgsql STABLE
SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp SET timezone = 'UTC' SET datestyle = 'ISO, YMD'
SET extra_float_digits = 1 AS $$
DECLARE
    n_points bigint;
    h_points bytea;
    n_fragments bigint;
    h_fragments bytea;
BEGIN
    SELECT count(*), governance.sha256_chain(convert_to(ROW(traj_id, seq, cell, t, set_id, t_end, region, geom)::text,
                                                        'UTF8') ORDER BY traj_id, seq)
      INTO n_points, h_points FROM staging.candidate_points WHERE release_id = p_release;
    SELECT count(*), governance.sha256_chain(convert_to(ROW(fragment_id, cells, estimated_count, round, geom)::text,
                                                        'UTF8') ORDER BY fragment_id)
      INTO n_fragments, h_fragments FROM staging.candidate_fragments WHERE release_id = p_release;
    RETURN jsonb_build_object('rows', n_points + n_fragments,
                              'hash', encode(sha256(coalesce(h_points, '') || coalesce(h_fragments, '')), 'hex'));
END $$;
REVOKE ALL ON FUNCTION governance.candidate_digest(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.candidate_digest(bigint) TO trajpub_pipeline, trajpub_steward;

CREATE TABLE IF NOT EXISTS governance.candidate_seals (
    release_id   bigint PRIMARY KEY REFERENCES governance.releases(release_id),
    n_rows       bigint NOT NULL,
    content_hash text NOT NULL,
    sealed_at    timestamptz NOT NULL DEFAULT now(),
    chain_seq    bigint UNIQUE,
    prev_hash    text,
    row_hash     text
);
REVOKE ALL ON governance.candidate_seals FROM PUBLIC;
GRANT SELECT ON governance.candidate_seals TO trajpub_pipeline, trajpub_steward;
DROP TRIGGER IF EXISTS candidate_seals_append_only ON governance.candidate_seals;
CREATE TRIGGER candidate_seals_append_only BEFORE UPDATE OR DELETE ON governance.candidate_seals
    FOR EACH ROW EXECUTE FUNCTION governance.forbid_change();
-- its hash chain (sql/015): "zz" after every other BEFORE INSERT trigger, so the digest covers the row as stored
INSERT INTO governance.chain_heads VALUES ('candidate_seals', 0, repeat('0', 64)) ON CONFLICT DO NOTHING;
DROP TRIGGER IF EXISTS zz_chain ON governance.candidate_seals;
CREATE TRIGGER zz_chain BEFORE INSERT ON governance.candidate_seals FOR EACH ROW
    EXECUTE FUNCTION governance.chain_row();
DROP TRIGGER IF EXISTS chain_advance ON governance.candidate_seals;
CREATE TRIGGER chain_advance AFTER INSERT ON governance.candidate_seals FOR EACH ROW
    EXECUTE FUNCTION governance.chain_advance();

-- Seal the staged candidate of p_release (the pipeline, right after staging, in the staging transaction): only
-- while rows may still be staged (planned or validated), once. Returns {rows, hash}.
CREATE OR REPLACE FUNCTION governance.seal_candidate(p_release bigint) RETURNS jsonb LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    st text;
    d jsonb;
BEGIN
    SELECT status INTO st FROM governance.releases WHERE release_id = p_release FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release % does not exist', p_release USING ERRCODE = 'TP001';
    END IF;
    IF st NOT IN ('planned', 'validated') THEN
        RAISE EXCEPTION 'release % is ''%'': its candidate is sealed when it is staged, before it is protected',
            p_release, st USING ERRCODE = 'TP001';
    END IF;
    IF EXISTS (SELECT 1 FROM governance.candidate_seals WHERE release_id = p_release) THEN
        RAISE EXCEPTION 'release %: its staged candidate is sealed already', p_release USING ERRCODE = 'TP001';
    END IF;
    d := governance.candidate_digest(p_release);
    INSERT INTO governance.candidate_seals (release_id, n_rows, content_hash)
        VALUES (p_release, (d ->> 'rows')::bigint, d ->> 'hash');
    RETURN d;
END $$;
REVOKE ALL ON FUNCTION governance.seal_candidate(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.seal_candidate(bigint) TO trajpub_pipeline;

-- Publication (governance.publish_release, sql/026) ends by making the release published: the candidate it
-- copied must be the sealed one.
CREATE OR REPLACE FUNCTION governance.check_candidate_seal() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    seal record;
    d jsonb;
BEGIN
    SELECT n_rows, content_hash INTO seal FROM governance.candidate_seals WHERE release_id = NEW.release_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release % cannot be published: its staged candidate has no seal (its row count and '
            'digest are recorded when it is staged)', NEW.release_id USING ERRCODE = 'TP001';
    END IF;
    d := governance.candidate_digest(NEW.release_id);
    IF (d ->> 'rows')::bigint <> seal.n_rows OR d ->> 'hash' <> seal.content_hash THEN
        RAISE EXCEPTION 'release % cannot be published: its staged candidate changed after it was staged and '
            'audited (% rows, digest %... sealed; % rows, digest %... now)', NEW.release_id, seal.n_rows,
            left(seal.content_hash, 12), d ->> 'rows', left(d ->> 'hash', 12) USING ERRCODE = 'TP001';
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS releases_seal_checked ON governance.releases;
CREATE TRIGGER releases_seal_checked BEFORE UPDATE OF status ON governance.releases
    FOR EACH ROW WHEN (NEW.status = 'published' AND OLD.status IS DISTINCT FROM 'published')
    EXECUTE FUNCTION governance.check_candidate_seal();
