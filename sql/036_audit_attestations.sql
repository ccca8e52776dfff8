-- Evidence the database checks (docs/design.md, "Evidence bound to the candidate"). Before, the pipeline login
-- could forge a whole release in SQL alone: write a validation result, stage raw points and seal them itself, copy
-- passing audit results and a review report from another release, and walk it to awaiting_approval with no ledger
-- charge; one approval then published raw points. Now:
--   * the audit's evidence (audit_results, the review report, the gate's decision in the release summary) is
--     written only by the auditor login (trajpub_auditor), never by the pipeline;
--   * the auditor attests it with governance.attest_audit, which re-reads the staged candidate, recomputes its
--     digest against the seal, and records the digests of the audit results, the report and the gate decision
--     with its own login, which must differ from the login that sealed the candidate;
--   * a release becomes awaiting_approval only with a ledger charge not given back, a seal, and an attestation
--     whose digests still match the candidate's seal, its audit results, its report and its gate decision, a
--     gate that did not block it.
-- Anchors: in-toto/Sigstore attestations (an artefact's digest bound to the step that produced it, under that
-- step's identity); PostgreSQL SECURITY DEFINER functions that check their evidence.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trajpub_auditor') THEN
        CREATE ROLE trajpub_auditor NOLOGIN;
    END IF;
END $$;
GRANT USAGE ON SCHEMA governance, staging TO trajpub_auditor;
GRANT USAGE ON SCHEMA public TO trajpub_auditor;
GRANT SELECT ON ALL TABLES IN SCHEMA governance TO trajpub_auditor;
REVOKE SELECT ON governance.decision_codes FROM trajpub_auditor;
GRANT SELECT ON staging.candidate_points, staging.candidate_fragments TO trajpub_auditor;
GRANT INSERT ON governance.audit_results, governance.review_reports TO trajpub_auditor;
REVOKE INSERT, UPDATE, DELETE ON governance.audit_results, governance.review_reports FROM trajpub_pipeline;

-- Who sealed a candidate: the login, set by the database (before the row's hash-chain digest is made: "a" sorts
-- before "zz_chain").
ALTER TABLE governance.candidate_seals ADD COLUMN IF NOT EXISTS sealed_by text;
CREATE OR REPLACE FUNCTION governance.record_sealer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.sealed_by := session_user;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS a_sealed_by ON governance.candidate_seals;
CREATE TRIGGER a_sealed_by BEFORE INSERT ON governance.candidate_seals FOR EACH ROW
    EXECUTE FUNCTION governance.record_sealer();

-- The digests an attestation binds, each of what governance holds now.
CREATE OR REPLACE FUNCTION governance.audits_digest(p_release bigint) RETURNS text LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET timezone = 'UTC' SET extra_float_digits = 1 AS $$
    SELECT encode(sha256(coalesce(governance.sha256_chain(convert_to((to_jsonb(a) - 'created_at')::text, 'UTF8')
                                                          ORDER BY a.attack, a.resolution_m), '')), 'hex')
      FROM governance.audit_results a WHERE a.release_id = p_release
$$;
CREATE OR REPLACE FUNCTION governance.report_digest(p_release bigint) RETURNS text LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT encode(sha256(convert_to(html, 'UTF8')), 'hex') FROM governance.review_reports WHERE release_id = p_release
$$;
CREATE OR REPLACE FUNCTION governance.gate_digest(p_summary jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT encode(sha256(convert_to(coalesce(p_summary -> 'gate', 'null'::jsonb)::text, 'UTF8')), 'hex')
$$;
REVOKE ALL ON FUNCTION governance.audits_digest(bigint), governance.report_digest(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.audits_digest(bigint), governance.report_digest(bigint)
    TO trajpub_pipeline, trajpub_steward, trajpub_auditor;

-- The gate's decision and the utility figures reach the release summary only through the auditor.
CREATE OR REPLACE FUNCTION governance.record_gate(p_release bigint, p_utility jsonb, p_gate jsonb) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE st text;
BEGIN
    SELECT status INTO st FROM releases WHERE release_id = p_release FOR UPDATE;
    IF st IS DISTINCT FROM 'protected' THEN
        RAISE EXCEPTION 'release % is ''%'': the gate decides on a protected candidate', p_release,
            coalesce(st, 'missing') USING ERRCODE = 'TP001';
    END IF;
    IF jsonb_typeof(p_gate -> 'blocked') IS DISTINCT FROM 'boolean' THEN
        RAISE EXCEPTION 'release %: the gate''s decision says neither blocked nor passed', p_release
            USING ERRCODE = 'TP001';
    END IF;
    UPDATE releases SET summary = coalesce(summary, '{}'::jsonb)
                                  || jsonb_build_object('utility', p_utility, 'gate', p_gate), updated_at = now()
     WHERE release_id = p_release;
END $$;
REVOKE ALL ON FUNCTION governance.record_gate(bigint, jsonb, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.record_gate(bigint, jsonb, jsonb) TO trajpub_auditor;

-- Invoker's rights on purpose: current_user is whoever changes the row, the schema's owner inside record_gate.
CREATE OR REPLACE FUNCTION governance.gate_only_by_the_auditor() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.summary -> 'gate', NEW.summary -> 'utility') IS DISTINCT FROM
       (CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE OLD.summary -> 'gate' END,
        CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE OLD.summary -> 'utility' END)
       AND current_user <> (SELECT nspowner::regrole::text FROM pg_catalog.pg_namespace WHERE nspname = 'governance')
    THEN
        RAISE EXCEPTION 'release %: the gate''s decision and utility are recorded by the auditor only',
            NEW.release_id USING ERRCODE = 'TP001';
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS releases_gate_by_auditor ON governance.releases;
CREATE TRIGGER releases_gate_by_auditor BEFORE INSERT OR UPDATE ON governance.releases FOR EACH ROW
    EXECUTE FUNCTION governance.gate_only_by_the_auditor();

CREATE TABLE IF NOT EXISTS governance.audit_attestations (
    release_id   bigint PRIMARY KEY REFERENCES governance.releases(release_id),
    seal_hash    text NOT NULL,
    audits_hash  text NOT NULL,
    report_hash  text NOT NULL,
    gate_hash    text NOT NULL,
    attested_by  text NOT NULL,
    attested_at  timestamptz NOT NULL DEFAULT now(),
    chain_seq    bigint UNIQUE,
    prev_hash    text,
    row_hash     text
);
REVOKE ALL ON governance.audit_attestations FROM PUBLIC;
GRANT SELECT ON governance.audit_attestations TO trajpub_pipeline, trajpub_steward, trajpub_auditor;
DROP TRIGGER IF EXISTS audit_attestations_append_only ON governance.audit_attestations;
CREATE TRIGGER audit_attestations_append_only BEFORE UPDATE OR DELETE ON governance.audit_attestations
    FOR EACH ROW EXECUTE FUNCTION governance.forbid_change();
INSERT INTO governance.chain_heads VALUES ('audit_attestations', 0, repeat('0', 64)) ON CONFLICT DO NOTHING;
DROP TRIGGER IF EXISTS zz_chain ON governance.audit_attestations;
CREATE TRIGGER zz_chain BEFORE INSERT ON governance.audit_attestations FOR EACH ROW
    EXECUTE FUNCTION governance.chain_row();
DROP TRIGGER IF EXISTS chain_advance ON governance.audit_attestations;
CREATE TRIGGER chain_advance AFTER INSERT ON governance.audit_attestations FOR EACH ROW
    EXECUTE FUNCTION governance.chain_advance();

-- The auditor attests the audit of p_release: the staged candidate read again and its digest checked against the
-- seal, then the digests of its audit results, its report and its gate decision recorded under the auditor's
-- login, which must not be the one that sealed the candidate. Returns the attestation's row hash.
CREATE OR REPLACE FUNCTION governance.attest_audit(p_release bigint) RETURNS text LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE
    seal record;
    rel record;
    d jsonb;
    made text;
BEGIN
    IF NOT pg_catalog.pg_has_role(session_user, 'trajpub_auditor', 'MEMBER') THEN
        RAISE EXCEPTION 'only the auditor login attests an audit, not %', session_user USING ERRCODE = 'TP001';
    END IF;
    SELECT status, summary INTO rel FROM releases WHERE release_id = p_release FOR UPDATE;
    IF rel.status IS DISTINCT FROM 'protected' THEN
        RAISE EXCEPTION 'release % is ''%'': an audit is attested on a protected candidate', p_release,
            coalesce(rel.status, 'missing') USING ERRCODE = 'TP001';
    END IF;
    SELECT n_rows, content_hash, sealed_by INTO seal FROM candidate_seals WHERE release_id = p_release;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release %: its staged candidate has no seal to attest', p_release USING ERRCODE = 'TP001';
    END IF;
    IF seal.sealed_by IS NOT DISTINCT FROM session_user THEN
        RAISE EXCEPTION 'release %: the login that sealed the candidate (%) cannot attest its audit', p_release,
            session_user USING ERRCODE = 'TP001';
    END IF;
    d := candidate_digest(p_release);
    IF (d ->> 'rows')::bigint <> seal.n_rows OR d ->> 'hash' <> seal.content_hash THEN
        RAISE EXCEPTION 'release %: the staged candidate is not the one sealed', p_release USING ERRCODE = 'TP001';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM review_reports WHERE release_id = p_release) OR rel.summary -> 'gate' IS NULL THEN
        RAISE EXCEPTION 'release %: an attestation needs the review report and the gate''s decision', p_release
            USING ERRCODE = 'TP001';
    END IF;
    INSERT INTO audit_attestations (release_id, seal_hash, audits_hash, report_hash, gate_hash, attested_by)
        VALUES (p_release, seal.content_hash, audits_digest(p_release), report_digest(p_release),
                gate_digest(rel.summary), session_user)
        RETURNING row_hash INTO made;
    RETURN made;
END $$;
REVOKE ALL ON FUNCTION governance.attest_audit(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.attest_audit(bigint) TO trajpub_auditor;

-- What a release needs to await a steward's decision: the chain charge -> seal -> attested audit, intact now.
-- (A one-line reason for each break, the first one found: governance.evidence_break, which `trajpub verify`
-- reads too.)
CREATE OR REPLACE FUNCTION governance.evidence_break(p_release bigint, p_summary jsonb) RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE
    seal record;
    att record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM budget_ledger WHERE release_id = p_release AND entry_kind = 'charge') THEN
        RETURN 'the ledger holds no charge for it';
    END IF;
    IF EXISTS (SELECT 1 FROM budget_ledger WHERE release_id = p_release AND entry_kind = 'release') THEN
        RETURN 'its charge was given back';
    END IF;
    SELECT content_hash, sealed_by INTO seal FROM candidate_seals WHERE release_id = p_release;
    IF NOT FOUND THEN
        RETURN 'its staged candidate has no seal';
    END IF;
    SELECT * INTO att FROM audit_attestations WHERE release_id = p_release;
    IF NOT FOUND THEN
        RETURN 'the auditor has not attested its audit';
    END IF;
    IF att.seal_hash <> seal.content_hash THEN
        RETURN 'the attested audit judged another candidate than the sealed one';
    END IF;
    IF att.attested_by IS NOT DISTINCT FROM seal.sealed_by THEN
        RETURN 'its audit was attested by the login that sealed its candidate';
    END IF;
    IF att.audits_hash IS DISTINCT FROM audits_digest(p_release) THEN
        RETURN 'its audit results changed after the auditor attested them';
    END IF;
    IF att.report_hash IS DISTINCT FROM report_digest(p_release) THEN
        RETURN 'its review report changed after the auditor attested it';
    END IF;
    IF att.gate_hash <> gate_digest(p_summary) THEN
        RETURN 'its gate decision changed after the auditor attested it';
    END IF;
    IF p_summary -> 'gate' ->> 'blocked' IS DISTINCT FROM 'false' THEN
        RETURN 'the attested gate blocked it';
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION governance.evidence_break(bigint, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.evidence_break(bigint, jsonb) TO trajpub_pipeline, trajpub_steward;

CREATE OR REPLACE FUNCTION governance.check_release_evidence() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE why text := evidence_break(NEW.release_id, NEW.summary);
BEGIN
    IF why IS NOT NULL THEN
        RAISE EXCEPTION 'release % cannot await approval: %', NEW.release_id, why USING ERRCODE = 'TP001';
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS releases_evidence_checked ON governance.releases;
CREATE TRIGGER releases_evidence_checked BEFORE UPDATE OF status ON governance.releases
    FOR EACH ROW WHEN (NEW.status = 'awaiting_approval' AND OLD.status IS DISTINCT FROM 'awaiting_approval')
    EXECUTE FUNCTION governance.check_release_evidence();
