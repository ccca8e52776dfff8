-- The steward's pick among the candidates of a comparison (issue 18; flows/compare.py): one decision approves the
-- picked candidate and rejects every other candidate of the same comparison that awaits approval, as the same
-- login, in one transaction. A comparison's candidates are the releases planned by one flow run (flow_run_id).
-- As with a single release, the steward decides either as their login (`trajpub release pick`) or in the Prefect
-- UI form with a one-time code issued for the picked release (`trajpub steward code RELEASE`), which the flow (the
-- pipeline role) redeems. Four-eyes, the status and the comments are checked by governance.record_decision; the
-- picked release's summary records the pick, which its COMPLETE lineage event names.
CREATE OR REPLACE FUNCTION governance.record_pick(p_release bigint, p_steward text, p_comment text)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE
    run uuid;
    other bigint;
BEGIN
    SELECT flow_run_id INTO run FROM releases WHERE release_id = p_release;
    IF run IS NULL THEN
        RAISE EXCEPTION 'release % is not a candidate of a comparison', p_release USING ERRCODE = 'TP001';
    END IF;
    PERFORM record_decision(p_release, p_steward, 'approved', p_comment);
    -- the comparison the release was picked from names the pick (its lineage facet; tasks.publish)
    UPDATE releases SET summary = jsonb_set(summary, '{comparison,picked}', to_jsonb(p_release))
     WHERE release_id = p_release AND summary ? 'comparison';
    FOR other IN SELECT release_id FROM releases WHERE flow_run_id = run AND release_id <> p_release
                   AND status = 'awaiting_approval' ORDER BY release_id LOOP
        PERFORM record_decision(other, p_steward, 'rejected',
                                format('not picked: release %s of the same comparison was picked', p_release));
    END LOOP;
END $$;
REVOKE ALL ON FUNCTION governance.record_pick(bigint, text, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION governance.pick(p_release bigint, p_comment text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = governance, pg_temp AS $$
    SELECT governance.record_pick(p_release, session_user::text, p_comment)
$$;
REVOKE ALL ON FUNCTION governance.pick(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.pick(bigint, text) TO trajpub_steward;

-- The one-time code of the Prefect UI form (sql/015), redeemed in one place for a decision and a pick: returns the
-- login that issued it for p_release, or refuses.
CREATE OR REPLACE FUNCTION governance.redeem_decision_code(p_release bigint, p_code text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE who text;
BEGIN
    UPDATE decision_codes SET used_at = now()
     WHERE code_sha256 = encode(sha256(convert_to(btrim(p_code), 'UTF8')), 'hex') AND release_id = p_release
       AND used_at IS NULL AND expires_at > now()
    RETURNING steward INTO who;
    IF who IS NULL THEN
        RAISE EXCEPTION 'the decision code is not valid for release % (wrong, used or expired): get one with '
            '`trajpub steward code %`', p_release, p_release USING ERRCODE = 'TP001';
    END IF;
    RETURN who;
END $$;
REVOKE ALL ON FUNCTION governance.redeem_decision_code(bigint, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION governance.decide_with_code(p_release bigint, p_decision text, p_comment text,
                                                       p_code text) RETURNS text LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE who text := redeem_decision_code(p_release, p_code);
BEGIN
    PERFORM record_decision(p_release, who, p_decision, p_comment);
    RETURN who;
END $$;

CREATE OR REPLACE FUNCTION governance.pick_with_code(p_release bigint, p_comment text, p_code text) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE who text := redeem_decision_code(p_release, p_code);
BEGIN
    PERFORM record_pick(p_release, who, p_comment);
    RETURN who;
END $$;
REVOKE ALL ON FUNCTION governance.pick_with_code(bigint, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.pick_with_code(bigint, text, text) TO trajpub_pipeline;
