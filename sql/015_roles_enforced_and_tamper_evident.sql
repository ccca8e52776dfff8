-- Governance enforced in the database (issue 16, items 2-4):
--  * least privilege: the pipeline writes the data path and cannot decide (no cap, four-eyes, requester or
--    backwards status change); stewards decide only through the functions below, which record their login;
--  * the release status machine, the ε/δ caps and four-eyes hold for every client, the owner included (unless
--    the owner disables triggers: what that leaves is the hash chains, checked by `trajpub verify`);
--  * tamper evidence: every row of the append-only tables chains the SHA-256 of the previous row.
-- Logins and passwords are made by `trajpub db up` / `trajpub steward add`; here only privileges.
-- Governance refusals raise SQLSTATE TP001 with a one-sentence message (tasks.governance turns them into
-- PolicyError).

-- Published tables and views belong to a group the pipeline (publishes) and stewards (withdraw) are members of.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trajpub_publisher') THEN
        CREATE ROLE trajpub_publisher NOLOGIN;
    END IF;
END $$;
GRANT trajpub_publisher TO trajpub_pipeline, trajpub_steward;
GRANT USAGE, CREATE ON SCHEMA published TO trajpub_publisher;
REVOKE CREATE ON SCHEMA published FROM trajpub_pipeline;
DO $$
DECLARE rel record;
BEGIN
    FOR rel IN SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'published' AND c.relkind IN ('r', 'v') AND c.relname <> 'release_lineage' LOOP
        EXECUTE format('ALTER %s published.%I OWNER TO trajpub_publisher',
                       CASE rel.relkind WHEN 'v' THEN 'VIEW' ELSE 'TABLE' END, rel.relname);
    END LOOP;
END $$;

-- The release status machine, one table for the database and the application (tasks.governance.transition).
CREATE TABLE IF NOT EXISTS governance.release_status_moves (
    from_status  text NOT NULL,
    to_status    text NOT NULL,
    PRIMARY KEY (from_status, to_status)
);
INSERT INTO governance.release_status_moves VALUES
    ('planned', 'validated'), ('validated', 'protected'), ('protected', 'audited'), ('audited', 'blocked'),
    ('audited', 'awaiting_approval'), ('awaiting_approval', 'approved'), ('awaiting_approval', 'rejected'),
    ('approved', 'published'), ('published', 'withdrawn'),
    ('planned', 'failed'), ('validated', 'failed'), ('protected', 'failed'), ('audited', 'failed'),
    ('awaiting_approval', 'failed'), ('approved', 'failed')
ON CONFLICT DO NOTHING;

CREATE OR REPLACE FUNCTION governance.enforce_release_rules() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF NEW.status <> 'planned' THEN
            RAISE EXCEPTION 'a release starts planned, not %', NEW.status USING ERRCODE = 'TP001';
        END IF;
        RETURN NEW;
    END IF;
    IF (NEW.release_id, NEW.dataset, NEW.mechanism, NEW.params, NEW.spec, NEW.requested_by, NEW.guarantee,
        NEW.window_start, NEW.window_end, NEW.created_at) IS DISTINCT FROM
       (OLD.release_id, OLD.dataset, OLD.mechanism, OLD.params, OLD.spec, OLD.requested_by, OLD.guarantee,
        OLD.window_start, OLD.window_end, OLD.created_at) THEN
        RAISE EXCEPTION 'release %: what was requested, and by whom, cannot change', OLD.release_id
            USING ERRCODE = 'TP001';
    END IF;
    IF OLD.mechanism_started_at IS NOT NULL AND NEW.mechanism_started_at IS DISTINCT FROM OLD.mechanism_started_at
    THEN  -- the budget it reserved is spent from then on (sql/013): never given back
        RAISE EXCEPTION 'release %: the time its mechanism started cannot change', OLD.release_id
            USING ERRCODE = 'TP001';
    END IF;
    IF NEW.status IS DISTINCT FROM OLD.status THEN
        IF NOT EXISTS (SELECT 1 FROM release_status_moves WHERE from_status = OLD.status AND to_status = NEW.status)
        THEN
            RAISE EXCEPTION 'release % is ''%'' and cannot become ''%''', OLD.release_id, OLD.status, NEW.status
                USING ERRCODE = 'TP001';
        END IF;
        IF NEW.status IN ('approved', 'rejected') AND NOT EXISTS (
                SELECT 1 FROM approvals WHERE release_id = NEW.release_id AND decision = NEW.status) THEN
            RAISE EXCEPTION 'release % becomes % only by a steward''s decision', OLD.release_id, NEW.status
                USING ERRCODE = 'TP001';
        END IF;
        IF NEW.status = 'withdrawn' AND NOT EXISTS (SELECT 1 FROM withdrawals WHERE release_id = NEW.release_id)
        THEN
            RAISE EXCEPTION 'release % is withdrawn only by a steward', OLD.release_id USING ERRCODE = 'TP001';
        END IF;
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS releases_rules ON governance.releases;
CREATE TRIGGER releases_rules BEFORE INSERT OR UPDATE ON governance.releases
    FOR EACH ROW EXECUTE FUNCTION governance.enforce_release_rules();
DROP TRIGGER IF EXISTS releases_no_delete ON governance.releases;
CREATE TRIGGER releases_no_delete BEFORE DELETE ON governance.releases
    FOR EACH ROW EXECUTE FUNCTION governance.forbid_change();

-- Least privilege for the pipeline: descriptive columns only; a new dataset gets the default caps.
REVOKE UPDATE ON governance.releases, governance.datasets FROM trajpub_pipeline;
GRANT UPDATE (status, updated_at, failure_reason, flow_run_id, snapshot_hash, snapshot_points, published_table,
              summary) ON governance.releases TO trajpub_pipeline;
REVOKE INSERT ON governance.datasets FROM trajpub_pipeline;
GRANT INSERT (dataset) ON governance.datasets TO trajpub_pipeline;
GRANT SELECT ON governance.release_status_moves TO trajpub_pipeline, trajpub_steward;
GRANT UPDATE (html, created_at) ON governance.review_reports TO trajpub_pipeline;  -- a re-audited release
GRANT SELECT ON governance.schema_migrations TO trajpub_pipeline, trajpub_steward;  -- `trajpub db status`
GRANT UPDATE (mechanism_started_at) ON governance.releases TO trajpub_pipeline;  -- once: see releases_rules
GRANT UPDATE (staging_purged_at) ON governance.releases TO trajpub_pipeline;  -- staging retention (sql/014)
-- A steward's gate policies (sql/013) record the login that registered or set them, not a name typed in.
ALTER TABLE governance.gate_policies ALTER COLUMN registered_by SET DEFAULT session_user;
ALTER TABLE governance.dataset_policies ALTER COLUMN set_by SET DEFAULT session_user;
REVOKE INSERT ON governance.gate_policies, governance.dataset_policies FROM trajpub_steward;
GRANT INSERT (name, version, policy) ON governance.gate_policies TO trajpub_steward;
GRANT INSERT (dataset, policy_name, policy_version) ON governance.dataset_policies TO trajpub_steward;
-- Stewards set the policy (caps, four-eyes); they decide and withdraw only through the functions below.
GRANT UPDATE (epsilon_cap, delta_cap, ldp_epsilon_cap, pufferfish_epsilon_cap, privacy_unit, four_eyes,
              staging_retention_days) ON governance.datasets TO trajpub_steward;
REVOKE INSERT ON governance.approvals, governance.withdrawals FROM trajpub_steward;
GRANT SELECT, INSERT ON governance.lineage_events TO trajpub_steward;  -- the withdrawal's lineage event
GRANT USAGE ON SEQUENCE governance.lineage_events_event_id_seq TO trajpub_steward;

-- The caps of each account in the dataset's unit (sequential composition within an account; accounts are never
-- summed: sql/014), checked under a lock on the dataset's row. The application refuses first with the same
-- figures (tasks/governance.py: check_budget); the database holds the line for any other writer.
CREATE OR REPLACE FUNCTION governance.budget_refusal(p_dataset text, p_account text, p_epsilon double precision,
                                                     p_delta double precision, p_lock boolean DEFAULT false)
RETURNS text LANGUAGE plpgsql SECURITY DEFINER SET search_path = governance, pg_temp
SET extra_float_digits = 0 AS $$
DECLARE
    d record;
    cap double precision;
    spent double precision;
    delta_spent double precision;
BEGIN
    IF p_lock THEN
        SELECT * INTO d FROM datasets WHERE dataset = p_dataset FOR UPDATE;
    ELSE
        SELECT * INTO d FROM datasets WHERE dataset = p_dataset;
    END IF;
    IF NOT FOUND THEN
        RETURN format('dataset ''%s'' has not been loaded', p_dataset);
    END IF;
    cap := CASE p_account WHEN 'epsilon-DP' THEN d.epsilon_cap WHEN 'epsilon-LDP' THEN d.ldp_epsilon_cap
                          WHEN 'Pufferfish' THEN d.pufferfish_epsilon_cap END;
    IF cap IS NULL THEN  -- heuristic guarantees are counted, not capped
        RETURN NULL;
    END IF;
    SELECT coalesce(sum(unit_epsilon), 0), coalesce(sum(unit_delta), 0) INTO spent, delta_spent
      FROM budget_ledger WHERE dataset = p_dataset AND account = p_account;
    IF spent + p_epsilon > cap + 1e-12 THEN
        RETURN format('this release needs %s epsilon %s per %s but dataset ''%s'' has only %s of its cap %s left',
                      p_account, p_epsilon, d.privacy_unit, p_dataset, cap - spent, cap);
    END IF;
    IF p_delta > 0 AND (p_account <> 'epsilon-DP' OR delta_spent + p_delta > d.delta_cap * (1 + 1e-12)) THEN
        RETURN format('this release needs delta %s but dataset ''%s'' has only %s of its delta cap %s left',
                      p_delta, p_dataset, greatest(d.delta_cap - delta_spent, 0), d.delta_cap);
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION governance.budget_refusal(text, text, double precision, double precision, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.budget_refusal(text, text, double precision, double precision, boolean)
    TO trajpub_pipeline, trajpub_steward;

CREATE OR REPLACE FUNCTION governance.enforce_budget_cap() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE refusal text;
BEGIN
    IF NEW.entry_kind <> 'charge' OR NEW.unit_epsilon IS NULL THEN  -- a reservation given back spends nothing;
        RETURN NEW;                                                   -- a heuristic guarantee spends no epsilon
    END IF;
    refusal := budget_refusal(NEW.dataset, NEW.account, NEW.unit_epsilon, coalesce(NEW.unit_delta, 0), true);
    IF refusal IS NOT NULL THEN
        RAISE EXCEPTION '%', refusal USING ERRCODE = 'TP001';
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS ledger_cap ON governance.budget_ledger;
CREATE TRIGGER ledger_cap BEFORE INSERT ON governance.budget_ledger
    FOR EACH ROW EXECUTE FUNCTION governance.enforce_budget_cap();

-- Four-eyes compares the approving login with the requester, case and spaces aside.
CREATE OR REPLACE FUNCTION governance.enforce_four_eyes() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
BEGIN
    IF NEW.decision = 'approved' AND EXISTS (
        SELECT 1 FROM releases r JOIN datasets d USING (dataset)
         WHERE r.release_id = NEW.release_id AND d.four_eyes
           AND lower(btrim(r.requested_by)) = lower(btrim(NEW.steward))) THEN
        RAISE EXCEPTION 'four-eyes policy: % requested release % and cannot approve it; another steward must',
            NEW.steward, NEW.release_id USING ERRCODE = 'TP001';
    END IF;
    RETURN NEW;
END $$;

-- A steward's decision: the approval row (with the deciding login), the status and its transition, together.
CREATE OR REPLACE FUNCTION governance.record_decision(p_release bigint, p_steward text, p_decision text,
                                                      p_comment text) RETURNS void LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE
    current text;
    earlier record;
BEGIN
    IF p_decision NOT IN ('approved', 'rejected') THEN
        RAISE EXCEPTION 'a decision is approved or rejected, not %', p_decision USING ERRCODE = 'TP001';
    END IF;
    SELECT status INTO current FROM releases WHERE release_id = p_release FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release % does not exist', p_release USING ERRCODE = 'TP001';
    END IF;
    SELECT decision, steward INTO earlier FROM approvals WHERE release_id = p_release;
    IF FOUND THEN
        RAISE EXCEPTION 'release % was already % by %', p_release, earlier.decision, earlier.steward
            USING ERRCODE = 'TP001';
    END IF;
    IF current <> 'awaiting_approval' THEN
        RAISE EXCEPTION 'release % is ''%'', not awaiting approval', p_release, current USING ERRCODE = 'TP001';
    END IF;
    IF p_decision = 'rejected' AND coalesce(btrim(p_comment), '') = '' THEN
        RAISE EXCEPTION 'a rejection needs a comment saying why' USING ERRCODE = 'TP001';
    END IF;
    INSERT INTO approvals (release_id, decision, steward, comment)
        VALUES (p_release, p_decision, p_steward, nullif(p_comment, ''));
    UPDATE releases SET status = p_decision, updated_at = now() WHERE release_id = p_release;
    INSERT INTO release_transitions (release_id, from_status, to_status, detail)
        VALUES (p_release, current, p_decision,
                p_decision || ' by ' || p_steward || coalesce(': ' || nullif(p_comment, ''), ''));
END $$;
REVOKE ALL ON FUNCTION governance.record_decision(bigint, text, text, text) FROM PUBLIC;

-- The steward decides as the login the connection authenticated (session_user), never a name they type.
CREATE OR REPLACE FUNCTION governance.decide(p_release bigint, p_decision text, p_comment text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = governance, pg_temp AS $$
    SELECT governance.record_decision(p_release, session_user::text, p_decision, p_comment)
$$;
REVOKE ALL ON FUNCTION governance.decide(bigint, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.decide(bigint, text, text) TO trajpub_steward;

-- The Prefect UI form cannot authenticate a steward: the steward issues a one-time code for one release (as
-- their login) and types it into the form; the flow (the pipeline role) redeems it, and the decision records
-- the login that issued the code. Only the code's SHA-256 is stored; a code expires after an hour.
CREATE TABLE IF NOT EXISTS governance.decision_codes (
    code_sha256  text PRIMARY KEY,
    release_id   bigint NOT NULL REFERENCES governance.releases(release_id),
    steward      text NOT NULL,
    issued_at    timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    used_at      timestamptz
);
REVOKE ALL ON governance.decision_codes FROM PUBLIC;

CREATE OR REPLACE FUNCTION governance.issue_decision_code(p_release bigint) RETURNS text LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE
    code text := replace(gen_random_uuid()::text, '-', '');
    current text;
BEGIN
    SELECT status INTO current FROM releases WHERE release_id = p_release;
    IF current IS DISTINCT FROM 'awaiting_approval' THEN
        RAISE EXCEPTION 'release % is ''%'', not awaiting approval', p_release, coalesce(current, 'missing')
            USING ERRCODE = 'TP001';
    END IF;
    INSERT INTO decision_codes (code_sha256, release_id, steward, expires_at)
        VALUES (encode(sha256(convert_to(code, 'UTF8')), 'hex'), p_release, session_user, now() + interval '1 hour');
    RETURN code;
END $$;
REVOKE ALL ON FUNCTION governance.issue_decision_code(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.issue_decision_code(bigint) TO trajpub_steward;

CREATE OR REPLACE FUNCTION governance.decide_with_code(p_release bigint, p_decision text, p_comment text,
                                                       p_code text) RETURNS text LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
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
    PERFORM record_decision(p_release, who, p_decision, p_comment);
    RETURN who;
END $$;
REVOKE ALL ON FUNCTION governance.decide_with_code(bigint, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.decide_with_code(bigint, text, text, text) TO trajpub_pipeline;

-- A withdrawal: recorded with the withdrawing login, and the status, together (the tables are dropped by the
-- steward's session in the same transaction, see tasks.publish.withdraw).
CREATE OR REPLACE FUNCTION governance.record_withdrawal(p_release bigint, p_reason text, p_tables text[])
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE current text;
BEGIN
    SELECT status INTO current FROM releases WHERE release_id = p_release FOR UPDATE;
    IF current IS DISTINCT FROM 'published' THEN
        RAISE EXCEPTION 'release % is ''%'': only a published release can be withdrawn', p_release,
            coalesce(current, 'missing') USING ERRCODE = 'TP001';
    END IF;
    IF coalesce(btrim(p_reason), '') = '' THEN
        RAISE EXCEPTION 'a withdrawal needs a reason' USING ERRCODE = 'TP001';
    END IF;
    INSERT INTO withdrawals (release_id, steward, reason, tables) VALUES (p_release, session_user, p_reason, p_tables);
    UPDATE releases SET status = 'withdrawn', updated_at = now() WHERE release_id = p_release;
    INSERT INTO release_transitions (release_id, from_status, to_status, detail)
        VALUES (p_release, 'published', 'withdrawn', 'withdrawn by ' || session_user || ': ' || p_reason);
END $$;
REVOKE ALL ON FUNCTION governance.record_withdrawal(bigint, text, text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.record_withdrawal(bigint, text, text[]) TO trajpub_steward;

-- Hash chains. A row's digest is the SHA-256 of its columns as JSON (jsonb text, nulls left out so that a
-- column added later with no default does not change old digests), its prev_hash included: the digest of the
-- row before it in the chain (chain_seq), 64 zeros for the first. chain_heads holds each chain's last row, so
-- a deleted last row shows too (an empty chain's head is row 0, 64 zeros). Times are rendered in UTC and floats exactly, whatever the session's settings.
CREATE TABLE IF NOT EXISTS governance.chain_heads (
    table_name  text PRIMARY KEY,
    chain_seq   bigint NOT NULL,
    row_hash    text NOT NULL
);
REVOKE ALL ON governance.chain_heads FROM PUBLIC;
GRANT SELECT ON governance.chain_heads TO trajpub_pipeline, trajpub_steward;

CREATE OR REPLACE FUNCTION governance.row_digest(r jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT encode(sha256(convert_to(jsonb_strip_nulls(r - 'row_hash')::text, 'UTF8')), 'hex')
$$;

-- Before insert: link the row to the head (whose row lock serialises the chain's writers). After insert: the
-- row is the head; an insert that ON CONFLICT skips never gets there, so the head stays a stored row. One row
-- per INSERT statement (row AFTER triggers run at the statement's end): two would claim the same chain_seq,
-- which its UNIQUE constraint refuses.
CREATE OR REPLACE FUNCTION governance.chain_row() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp SET timezone = 'UTC' SET extra_float_digits = 1 AS $$
DECLARE head record;
BEGIN
    SELECT chain_seq, row_hash INTO head FROM chain_heads WHERE table_name = TG_TABLE_NAME FOR UPDATE;
    NEW.chain_seq := head.chain_seq + 1;
    NEW.prev_hash := head.row_hash;
    NEW.row_hash := NULL;
    NEW.row_hash := row_digest(to_jsonb(NEW));
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION governance.chain_advance() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
BEGIN
    UPDATE chain_heads SET chain_seq = NEW.chain_seq, row_hash = NEW.row_hash WHERE table_name = TG_TABLE_NAME;
    RETURN NULL;
END $$;

DO $$
DECLARE
    t text;
    k text;
    r record;
    seq bigint;
    h text;
    d text;
BEGIN
    PERFORM set_config('timezone', 'UTC', true);
    PERFORM set_config('extra_float_digits', '1', true);
    FOR t, k IN VALUES ('approvals', 'approval_id'), ('budget_ledger', 'entry_id'),
                       ('withdrawals', 'withdrawn_at, release_id') LOOP
        EXECUTE format('ALTER TABLE governance.%I ADD COLUMN IF NOT EXISTS chain_seq bigint UNIQUE,'
                       ' ADD COLUMN IF NOT EXISTS prev_hash text, ADD COLUMN IF NOT EXISTS row_hash text', t);
        EXECUTE format('ALTER TABLE governance.%I DISABLE TRIGGER USER', t);  -- the append-only triggers
        seq := 0;
        h := repeat('0', 64);
        FOR r IN EXECUTE format('SELECT ctid AS at, to_jsonb(x) AS j FROM governance.%I x ORDER BY %s', t, k) LOOP
            seq := seq + 1;
            d := governance.row_digest(r.j || jsonb_build_object('chain_seq', seq, 'prev_hash', h));
            EXECUTE format('UPDATE governance.%I SET chain_seq = $1, prev_hash = $2, row_hash = $3 WHERE ctid = $4', t)
                USING seq, h, d, r.at;
            h := d;
        END LOOP;
        INSERT INTO governance.chain_heads VALUES (t, seq, h);  -- seq 0, 64 zeros: an empty chain
        EXECUTE format('ALTER TABLE governance.%I ENABLE TRIGGER USER', t);
        -- "zz": after every other BEFORE INSERT trigger, so the digest covers the row as stored
        EXECUTE format('DROP TRIGGER IF EXISTS zz_chain ON governance.%I', t);
        EXECUTE format('CREATE TRIGGER zz_chain BEFORE INSERT ON governance.%I FOR EACH ROW'
                       ' EXECUTE FUNCTION governance.chain_row()', t);
        EXECUTE format('DROP TRIGGER IF EXISTS chain_advance ON governance.%I', t);
        EXECUTE format('CREATE TRIGGER chain_advance AFTER INSERT ON governance.%I FOR EACH ROW'
                       ' EXECUTE FUNCTION governance.chain_advance()', t);
    END LOOP;
END $$;
