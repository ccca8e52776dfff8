-- A decision code binds what is decided, not only who decides (docs/design.md, "Decision codes and the control
-- plane"). Before, a code named the steward and the release only: a holder of the Prefect API string could delete
-- the steward's submitted answer before the flow read it and post the same code with `decision: approve`, and a
-- rejection was published as approved by that steward. Now the steward issues a code FOR a decision (approve,
-- reject, or pick for a comparison) and its comment, as their own login; the flow's presentation is refused when
-- the answer's decision differs, or when it carries another comment, and the comment recorded is the one the code
-- was issued with. A swapped answer can only spend the code, never turn it into another decision.

ALTER TABLE governance.decision_codes ADD COLUMN IF NOT EXISTS decision text;
ALTER TABLE governance.decision_codes ADD COLUMN IF NOT EXISTS comment text;
-- codes issued before this migration bind no decision: they are spent now
UPDATE governance.decision_codes SET used_at = now() WHERE decision IS NULL AND used_at IS NULL;
ALTER TABLE governance.decision_codes DROP CONSTRAINT IF EXISTS decision_codes_decision;
ALTER TABLE governance.decision_codes ADD CONSTRAINT decision_codes_decision
    CHECK (decision IN ('approved', 'rejected', 'picked')) NOT VALID;

DROP FUNCTION IF EXISTS governance.issue_decision_code(bigint);
CREATE OR REPLACE FUNCTION governance.issue_decision_code(p_release bigint, p_decision text, p_comment text)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE
    code text := CASE p_decision WHEN 'approved' THEN 'approve' WHEN 'rejected' THEN 'reject' ELSE 'pick' END
                 || '-' || replace(gen_random_uuid()::text, '-', '');
    current text;
BEGIN
    IF p_decision IS NULL OR p_decision NOT IN ('approved', 'rejected', 'picked') THEN
        RAISE EXCEPTION 'a decision code is issued to approve, reject or pick, not %', coalesce(p_decision, 'nothing')
            USING ERRCODE = 'TP001';
    END IF;
    IF p_decision = 'rejected' AND coalesce(btrim(p_comment), '') = '' THEN
        RAISE EXCEPTION 'a rejection needs a comment saying why' USING ERRCODE = 'TP001';
    END IF;
    SELECT status INTO current FROM releases WHERE release_id = p_release;
    IF current IS DISTINCT FROM 'awaiting_approval' THEN
        RAISE EXCEPTION 'release % is ''%'', not awaiting approval', p_release, coalesce(current, 'missing')
            USING ERRCODE = 'TP001';
    END IF;
    INSERT INTO decision_codes (code_sha256, release_id, steward, expires_at, decision, comment)
        VALUES (encode(sha256(convert_to(code, 'UTF8')), 'hex'), p_release, session_user, now() + interval '1 hour',
                p_decision, nullif(btrim(p_comment), ''));
    RETURN code;
END $$;
REVOKE ALL ON FUNCTION governance.issue_decision_code(bigint, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.issue_decision_code(bigint, text, text) TO trajpub_steward;

-- Spend the code p_code presented for p_decision on p_release with the answer's p_comment: marked used first
-- (sql/027), whatever follows. Returns the issuing login and the comment bound to the code, or a refusal.
DROP FUNCTION IF EXISTS governance.spend_decision_code(bigint, text);
CREATE OR REPLACE FUNCTION governance.spend_decision_code(p_release bigint, p_code text, p_decision text,
                                                          p_comment text)
RETURNS TABLE (steward text, comment text, refused text) LANGUAGE plpgsql SECURITY DEFINER
SET search_path = governance, pg_temp AS $$
DECLARE spent record;
BEGIN
    UPDATE decision_codes d SET used_at = now()
     WHERE d.code_sha256 = encode(sha256(convert_to(btrim(p_code), 'UTF8')), 'hex') AND d.used_at IS NULL
    RETURNING d.release_id, d.steward, d.expires_at, d.decision, d.comment INTO spent;
    IF NOT FOUND OR spent.release_id <> p_release OR spent.expires_at <= now() THEN
        RETURN QUERY SELECT NULL::text, NULL::text, format('the decision code is not valid for release %s (wrong, '
            'used or expired): get one with `trajpub steward code %s --decision ...`', p_release, p_release);
    ELSIF spent.decision IS DISTINCT FROM p_decision THEN
        RETURN QUERY SELECT NULL::text, NULL::text, format('the decision code of release %s was issued to %s, not '
            'to %s: nothing is recorded and the code is spent', p_release, spent.decision, p_decision);
    ELSIF coalesce(btrim(p_comment), '') <> '' AND btrim(p_comment) IS DISTINCT FROM spent.comment THEN
        RETURN QUERY SELECT NULL::text, NULL::text, format('the comment differs from the one the decision code of '
            'release %s was issued with: nothing is recorded and the code is spent', p_release);
    ELSE
        RETURN QUERY SELECT spent.steward, spent.comment, NULL::text;
    END IF;
END $$;
REVOKE ALL ON FUNCTION governance.spend_decision_code(bigint, text, text, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION governance.decide_by_code(p_release bigint, p_decision text, p_comment text,
                                                     p_code text)
RETURNS TABLE (decided_by text, refused text) LANGUAGE plpgsql SECURITY DEFINER
SET search_path = governance, pg_temp AS $$
DECLARE spent record;
BEGIN
    SELECT * INTO spent FROM spend_decision_code(p_release, p_code, p_decision, p_comment);
    IF spent.refused IS NOT NULL THEN
        RETURN QUERY SELECT NULL::text, spent.refused;
        RETURN;
    END IF;
    BEGIN
        PERFORM record_decision(p_release, spent.steward, p_decision, spent.comment);
    EXCEPTION WHEN SQLSTATE 'TP001' THEN
        RETURN QUERY SELECT spent.steward, SQLERRM;
        RETURN;
    END;
    RETURN QUERY SELECT spent.steward, NULL::text;
END $$;
REVOKE ALL ON FUNCTION governance.decide_by_code(bigint, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.decide_by_code(bigint, text, text, text) TO trajpub_pipeline;

CREATE OR REPLACE FUNCTION governance.pick_by_code(p_release bigint, p_comment text, p_code text)
RETURNS TABLE (decided_by text, refused text) LANGUAGE plpgsql SECURITY DEFINER
SET search_path = governance, pg_temp AS $$
DECLARE spent record;
BEGIN
    SELECT * INTO spent FROM spend_decision_code(p_release, p_code, 'picked', p_comment);
    IF spent.refused IS NOT NULL THEN
        RETURN QUERY SELECT NULL::text, spent.refused;
        RETURN;
    END IF;
    BEGIN
        PERFORM record_pick(p_release, spent.steward, spent.comment);
    EXCEPTION WHEN SQLSTATE 'TP001' THEN
        RETURN QUERY SELECT spent.steward, SQLERRM;
        RETURN;
    END;
    RETURN QUERY SELECT spent.steward, NULL::text;
END $$;
REVOKE ALL ON FUNCTION governance.pick_by_code(bigint, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.pick_by_code(bigint, text, text) TO trajpub_pipeline;
