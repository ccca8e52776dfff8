-- A decision code (sql/015) is spent by its first presentation, accepted or not (docs/design.md, "Decision codes
-- and the control plane"): before, a refused decision (a rejection without a comment, four-eyes) rolled the
-- code's use back with it, and the code stayed valid for whoever had read it. The pipeline now presents a code
-- with governance.decide_by_code or governance.pick_by_code: the code is marked used first, the decision is tried
-- in a subtransaction, and a refusal comes back as text instead of an error, so the code's use commits with it.
-- A code presented for another release than its own is spent as well.

CREATE OR REPLACE FUNCTION governance.spend_decision_code(p_release bigint, p_code text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE spent record;
BEGIN
    UPDATE decision_codes SET used_at = now()
     WHERE code_sha256 = encode(sha256(convert_to(btrim(p_code), 'UTF8')), 'hex') AND used_at IS NULL
    RETURNING release_id, steward, expires_at INTO spent;
    IF NOT FOUND OR spent.release_id <> p_release OR spent.expires_at <= now() THEN
        RETURN NULL;
    END IF;
    RETURN spent.steward;
END $$;
REVOKE ALL ON FUNCTION governance.spend_decision_code(bigint, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION governance.decide_by_code(p_release bigint, p_decision text, p_comment text,
                                                     p_code text)
RETURNS TABLE (decided_by text, refused text) LANGUAGE plpgsql SECURITY DEFINER
SET search_path = governance, pg_temp AS $$
DECLARE who text := spend_decision_code(p_release, p_code);
BEGIN
    IF who IS NULL THEN
        RETURN QUERY SELECT NULL::text, format('the decision code is not valid for release %s (wrong, used or '
            'expired): get one with `trajpub steward code %s`', p_release, p_release);
        RETURN;
    END IF;
    BEGIN
        PERFORM record_decision(p_release, who, p_decision, p_comment);
    EXCEPTION WHEN SQLSTATE 'TP001' THEN
        RETURN QUERY SELECT who, SQLERRM;
        RETURN;
    END;
    RETURN QUERY SELECT who, NULL::text;
END $$;
REVOKE ALL ON FUNCTION governance.decide_by_code(bigint, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.decide_by_code(bigint, text, text, text) TO trajpub_pipeline;

CREATE OR REPLACE FUNCTION governance.pick_by_code(p_release bigint, p_comment text, p_code text)
RETURNS TABLE (decided_by text, refused text) LANGUAGE plpgsql SECURITY DEFINER
SET search_path = governance, pg_temp AS $$
DECLARE who text := spend_decision_code(p_release, p_code);
BEGIN
    IF who IS NULL THEN
        RETURN QUERY SELECT NULL::text, format('the decision code is not valid for release %s (wrong, used or '
            'expired): get one with `trajpub steward code %s`', p_release, p_release);
        RETURN;
    END IF;
    BEGIN
        PERFORM record_pick(p_release, who, p_comment);
    EXCEPTION WHEN SQLSTATE 'TP001' THEN
        RETURN QUERY SELECT who, SQLERRM;
        RETURN;
    END;
    RETURN QUERY SELECT who, NULL::text;
END $$;
REVOKE ALL ON FUNCTION governance.pick_by_code(bigint, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.pick_by_code(bigint, text, text) TO trajpub_pipeline;

-- The former ways to present a code, which kept a refused code valid, are gone.
DROP FUNCTION IF EXISTS governance.decide_with_code(bigint, text, text, text);
DROP FUNCTION IF EXISTS governance.pick_with_code(bigint, text, text);
DROP FUNCTION IF EXISTS governance.redeem_decision_code(bigint, text);
