-- Least privilege for publishing, ledger rows checked, evidence for status moves, and the stewards' rules held by
-- the database (docs/design.md, "The release status machine"; docs/operations.md, "Security model").
--  * Publication and withdrawal run only inside two SECURITY DEFINER functions owned by trajpub_publisher, a
--    NOLOGIN role that no login is a member of: no login (the pipeline, stewards) creates, writes, drops or grants
--    anything in `published`. governance.publish_release copies exactly the staged candidate of an approved
--    release; the staged candidate is frozen from the moment the release is protected until it ends.
--  * A status move needs its evidence rows; a give-back matches its charge; every ledger row is in its release's
--    dataset and the dataset's unit; caps are finite; the unit does not change under charges.
-- Refusals raise SQLSTATE TP001 with one sentence (tasks.governance.refusals).

-- 1. Nobody can act as the publisher: it owns `published`'s tables and views and the two functions below.
DO $$
DECLARE m record;
BEGIN
    FOR m IN SELECT r.rolname FROM pg_auth_members a JOIN pg_roles r ON r.oid = a.member
              WHERE a.roleid = 'trajpub_publisher'::regrole LOOP
        EXECUTE format('REVOKE trajpub_publisher FROM %I CASCADE', m.rolname);
    END LOOP;
END $$;
ALTER ROLE trajpub_publisher NOLOGIN;
REVOKE ALL ON SCHEMA published FROM PUBLIC, trajpub_pipeline, trajpub_steward, trajpub_consumer;
GRANT USAGE ON SCHEMA published TO trajpub_pipeline, trajpub_steward, trajpub_consumer;
GRANT USAGE, CREATE ON SCHEMA published TO trajpub_publisher;
-- Every relation of `published` (release_lineage aside, the owner's view of governance) belongs to the publisher,
-- and everyone else may only read it.
DO $$
DECLARE
    rel record;
    grantee oid;
BEGIN
    FOR rel IN SELECT c.oid, c.relname, c.relkind, c.relowner FROM pg_class c
                 JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'published' AND c.relkind IN ('r', 'v', 'm', 'p', 'f') LOOP
        IF rel.relname = 'release_lineage' THEN
            CONTINUE;
        END IF;
        IF rel.relowner <> 'trajpub_publisher'::regrole THEN
            EXECUTE format('ALTER TABLE published.%I OWNER TO trajpub_publisher', rel.relname);
        END IF;
        FOR grantee IN SELECT DISTINCT x.grantee FROM pg_class c, aclexplode(c.relacl) x
                        WHERE c.oid = rel.oid AND x.grantee <> 'trajpub_publisher'::regrole LOOP
            IF grantee = 0 THEN
                EXECUTE format('REVOKE ALL ON published.%I FROM PUBLIC', rel.relname);
            ELSE
                EXECUTE format('REVOKE ALL ON published.%I FROM %I', rel.relname, grantee::regrole::text);
            END IF;
        END LOOP;
        EXECUTE format('GRANT SELECT ON published.%I TO trajpub_consumer, trajpub_pipeline, trajpub_steward',
                       rel.relname);
    END LOOP;
END $$;
REVOKE ALL ON published.release_lineage FROM PUBLIC, trajpub_pipeline, trajpub_steward;
GRANT SELECT ON published.release_lineage TO trajpub_consumer, trajpub_pipeline, trajpub_steward;
-- The default privileges of 001 (for tables the owner creates there) are kept; the publisher grants explicitly.

-- What the publisher reads and writes, and nothing more.
GRANT USAGE ON SCHEMA governance, staging TO trajpub_publisher;
GRANT SELECT ON governance.releases, governance.approvals TO trajpub_publisher;
GRANT UPDATE (status, updated_at, published_table, summary) ON governance.releases TO trajpub_publisher;
GRANT INSERT ON governance.release_transitions TO trajpub_publisher;
GRANT SELECT ON staging.candidate_points, staging.candidate_fragments TO trajpub_publisher;
-- The published table of a release is named by the publication function, not by the pipeline.
REVOKE UPDATE (published_table) ON governance.releases FROM trajpub_pipeline;

-- A withdrawal is recorded only by the withdrawal function (which drops the tables in the same transaction).
REVOKE ALL ON FUNCTION governance.record_withdrawal(bigint, text, text[]) FROM PUBLIC, trajpub_steward;
GRANT EXECUTE ON FUNCTION governance.record_withdrawal(bigint, text, text[]) TO trajpub_publisher;

-- Publish an approved release: its staged candidate (staging.candidate_points, or staging.candidate_fragments for
-- the fragments shape; never staging.candidate_owners) becomes published.<dataset>__r<id> (and <...>_traj, the
-- LineStringM of each trajectory, M = position), the <dataset>_latest views of its product point at it, the
-- consumer (and the pipeline and stewards) may read them, and the release is published, all in the caller's
-- transaction. Returns {table, tables, counts}. The caller adds the lineage COMPLETE event (tasks/publish.py).
CREATE OR REPLACE FUNCTION governance.publish_release(p_release bigint) RETURNS jsonb LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    rel record;
    shape text;
    main text;
    traj text;
    sets text;
    regions text;
    counts jsonb;
    tables text[];
    suffixes text[];
    detail text;
    n bigint;
    m bigint;
BEGIN
    SELECT * INTO rel FROM governance.releases WHERE release_id = p_release FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'release % does not exist', p_release USING ERRCODE = 'TP001';
    END IF;
    IF rel.status <> 'approved' OR NOT EXISTS (
            SELECT 1 FROM governance.approvals WHERE release_id = p_release AND decision = 'approved') THEN
        RAISE EXCEPTION 'release % is ''%'': only an approved release is published', p_release, rel.status
            USING ERRCODE = 'TP001';
    END IF;
    IF rel.dataset !~ '^[a-z][a-z0-9_]{0,39}$' THEN
        RAISE EXCEPTION 'release %: dataset name % cannot name a published table', p_release, rel.dataset
            USING ERRCODE = 'TP001';
    END IF;
    shape := rel.summary ->> 'shape';
    IF shape IS NULL OR shape NOT IN ('synthetic', 'truthful', 'anonymity_sets', 'generalised', 'fragments') THEN
        RAISE EXCEPTION 'release % has no staged shape that can be published (%)', p_release,
            coalesce(shape, 'none') USING ERRCODE = 'TP001';
    END IF;
    main := rel.dataset || '__r' || p_release;
    IF shape = 'fragments' THEN
        EXECUTE format('CREATE TABLE published.%I AS SELECT fragment_id, cells, cardinality(cells) AS length,'
                       ' estimated_count, round, geom FROM staging.candidate_fragments WHERE release_id = %s'
                       ' ORDER BY fragment_id', main, p_release);
        EXECUTE format('ALTER TABLE published.%I ADD PRIMARY KEY (fragment_id)', main);
        EXECUTE format('CREATE INDEX ON published.%I USING gist (geom)', main);
        EXECUTE format('SELECT count(*) FROM published.%I', main) INTO n;
        counts := jsonb_build_object('fragments', n);
        detail := n || ' fragments';
        tables := ARRAY[main];
        suffixes := ARRAY['_fragments'];
    ELSE
        traj := main || '_traj';
        sets := CASE WHEN shape IN ('anonymity_sets', 'generalised') THEN 'set_id, ' ELSE '' END;
        regions := CASE WHEN shape = 'generalised'
                        THEN 't_end, region::geometry(Polygon, 4326) AS region, ' ELSE '' END;
        EXECUTE format('CREATE TABLE published.%I AS SELECT %straj_id, seq, t, %sgeom::geometry(Point, 4326) AS geom'
                       ' FROM staging.candidate_points WHERE release_id = %s ORDER BY traj_id, seq',
                       main, sets, regions, p_release);
        EXECUTE format('ALTER TABLE published.%I ADD PRIMARY KEY (traj_id, seq)', main);
        EXECUTE format('CREATE INDEX ON published.%I USING gist (geom)', main);
        EXECUTE format('CREATE TABLE published.%I AS SELECT %straj_id, count(*)::int AS n_points,'
                       ' CASE WHEN count(*) > 1 THEN ST_MakeLine(ST_MakePointM(ST_X(geom), ST_Y(geom), seq)'
                       ' ORDER BY seq) END::geometry(LineStringM, 4326) AS geom FROM published.%I GROUP BY %straj_id',
                       traj, sets, main, sets);
        EXECUTE format('ALTER TABLE published.%I ADD PRIMARY KEY (traj_id)', traj);
        EXECUTE format('CREATE INDEX ON published.%I USING gist (geom)', traj);
        EXECUTE format('SELECT count(*) FROM published.%I', main) INTO n;
        EXECUTE format('SELECT count(*) FROM published.%I', traj) INTO m;
        counts := jsonb_build_object('points', n, 'trajectories', m);
        detail := n || ' points, ' || m || ' trajectories';
        tables := ARRAY[main, traj];
        suffixes := ARRAY['', '_traj'];
    END IF;
    FOR i IN 1 .. cardinality(tables) LOOP
        EXECUTE format('GRANT SELECT ON published.%I TO trajpub_consumer, trajpub_pipeline, trajpub_steward',
                       tables[i]);
        -- dropped first: the newest release may have another shape than the last (set_id, t_end/region), and
        -- CREATE OR REPLACE VIEW cannot rename or drop columns
        EXECUTE format('DROP VIEW IF EXISTS published.%I', rel.dataset || '_latest' || suffixes[i]);
        EXECUTE format('CREATE VIEW published.%I AS SELECT * FROM published.%I',
                       rel.dataset || '_latest' || suffixes[i], tables[i]);
        EXECUTE format('GRANT SELECT ON published.%I TO trajpub_consumer, trajpub_pipeline, trajpub_steward',
                       rel.dataset || '_latest' || suffixes[i]);
    END LOOP;
    EXECUTE format('COMMENT ON TABLE published.%I IS %L', main,
                   format('trajpub release %s of %s (%s, %s). %s Lineage: published.release_lineage where '
                          'release_id = %s.', p_release, rel.dataset, rel.mechanism,
                          CASE shape WHEN 'fragments' THEN 'fragments' ELSE 'trajectories' END,
                          coalesce(rel.guarantee ->> 'statement', ''), p_release));
    UPDATE governance.releases
       SET status = 'published', updated_at = now(), published_table = 'published.' || main,
           summary = summary || jsonb_build_object('published', counts)
     WHERE release_id = p_release;
    INSERT INTO governance.release_transitions (release_id, from_status, to_status, detail)
        VALUES (p_release, 'approved', 'published', 'published.' || main || ': ' || detail);
    RETURN jsonb_build_object('table', 'published.' || main, 'tables', to_jsonb(tables), 'counts', counts);
END $$;
ALTER FUNCTION governance.publish_release(bigint) OWNER TO trajpub_publisher;
REVOKE ALL ON FUNCTION governance.publish_release(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.publish_release(bigint) TO trajpub_pipeline;

-- Withdraw a published release, as the steward whose login the connection authenticated: its published tables
-- go (with the _latest views on them, re-created on the newest remaining published release of the same dataset
-- and product, if any) and the withdrawal is recorded (governance.record_withdrawal), in the caller's
-- transaction. Returns the dropped tables. The caller adds the lineage event (tasks/publish.py).
CREATE OR REPLACE FUNCTION governance.withdraw_release(p_release bigint, p_reason text) RETURNS text[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    rel record;
    fragments boolean;
    main text;
    tables text[];
    suffixes text[];
    newest bigint;
    view text;
BEGIN
    SELECT * INTO rel FROM governance.releases WHERE release_id = p_release FOR UPDATE;
    IF NOT FOUND OR rel.status <> 'published' THEN
        RAISE EXCEPTION 'release % is ''%'': only a published release can be withdrawn', p_release,
            coalesce(rel.status, 'missing') USING ERRCODE = 'TP001';
    END IF;
    IF coalesce(btrim(p_reason), '') = '' THEN
        RAISE EXCEPTION 'a withdrawal needs a reason' USING ERRCODE = 'TP001';
    END IF;
    fragments := rel.summary ->> 'shape' = 'fragments';
    main := rel.dataset || '__r' || p_release;
    IF fragments THEN
        tables := ARRAY[main];
        suffixes := ARRAY['_fragments'];
    ELSE
        tables := ARRAY[main, main || '_traj'];
        suffixes := ARRAY['', '_traj'];
    END IF;
    FOR i IN 1 .. cardinality(tables) LOOP
        EXECUTE format('DROP TABLE IF EXISTS published.%I CASCADE', tables[i]);  -- and the views on it
    END LOOP;
    SELECT release_id INTO newest FROM governance.releases
     WHERE dataset = rel.dataset AND status = 'published' AND release_id <> p_release
       AND (summary ->> 'shape' = 'fragments') = fragments
     ORDER BY release_id DESC LIMIT 1;
    IF newest IS NOT NULL THEN
        FOR i IN 1 .. cardinality(tables) LOOP
            view := rel.dataset || '_latest' || suffixes[i];
            IF to_regclass(format('published.%I', view)) IS NULL THEN
                EXECUTE format('CREATE VIEW published.%I AS SELECT * FROM published.%I', view,
                               rel.dataset || '__r' || newest || CASE suffixes[i] WHEN '_traj' THEN '_traj' ELSE '' END);
                EXECUTE format('GRANT SELECT ON published.%I TO trajpub_consumer, trajpub_pipeline, trajpub_steward',
                               view);
            END IF;
        END LOOP;
    END IF;
    tables := ARRAY(SELECT 'published.' || t FROM unnest(tables) AS t);
    PERFORM governance.record_withdrawal(p_release, p_reason, tables);
    RETURN tables;
END $$;
ALTER FUNCTION governance.withdraw_release(bigint, text) OWNER TO trajpub_publisher;
REVOKE ALL ON FUNCTION governance.withdraw_release(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.withdraw_release(bigint, text) TO trajpub_steward;

-- 2. The staged candidate is what the steward reviews: rows are added only before the release is protected, and
-- removed only once it has ended (staging retention, a dataset's drop). Statement triggers: a city's candidate
-- is one COPY of millions of rows.
CREATE OR REPLACE FUNCTION governance.freeze_staged_candidate() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE bad record;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT r.release_id, r.status INTO bad FROM releases r
         WHERE r.release_id IN (SELECT DISTINCT release_id FROM new_rows)
           AND r.status NOT IN ('planned', 'validated') LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'release % is ''%'': its staged candidate is fixed once it is protected',
                bad.release_id, bad.status USING ERRCODE = 'TP001';
        END IF;
    ELSE
        SELECT r.release_id, r.status INTO bad FROM releases r
         WHERE r.release_id IN (SELECT DISTINCT release_id FROM old_rows)
           AND r.status NOT IN ('blocked', 'rejected', 'published', 'failed', 'withdrawn') LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'release % is ''%'': its staged candidate is deleted only once it has ended',
                bad.release_id, bad.status USING ERRCODE = 'TP001';
        END IF;
    END IF;
    RETURN NULL;
END $$;
DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['candidate_points', 'candidate_fragments', 'candidate_owners'] LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS staged_insert_frozen ON staging.%I', t);
        EXECUTE format('CREATE TRIGGER staged_insert_frozen AFTER INSERT ON staging.%I REFERENCING NEW TABLE AS'
                       ' new_rows FOR EACH STATEMENT EXECUTE FUNCTION governance.freeze_staged_candidate()', t);
        EXECUTE format('DROP TRIGGER IF EXISTS staged_delete_frozen ON staging.%I', t);
        EXECUTE format('CREATE TRIGGER staged_delete_frozen AFTER DELETE ON staging.%I REFERENCING OLD TABLE AS'
                       ' old_rows FOR EACH STATEMENT EXECUTE FUNCTION governance.freeze_staged_candidate()', t);
    END LOOP;
END $$;

-- 3. Status moves and their evidence: validated needs the validation's result; audited the audit's results (or,
-- when nothing could be measured, an empty candidate or a gate that blocked: such a release ends blocked);
-- awaiting_approval a staged candidate and its audit results; published the table only governance.publish_release
-- can create; withdrawn a withdrawal (only governance.withdraw_release records one). The staged shape, once
-- recorded, stays: publication and withdrawal read from it which tables a release has.
CREATE OR REPLACE FUNCTION governance.enforce_release_rules() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE
    staged boolean;
    audited boolean;
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
    IF OLD.summary ? 'shape' AND NEW.summary -> 'shape' IS DISTINCT FROM OLD.summary -> 'shape' THEN
        RAISE EXCEPTION 'release %: the shape of its staged candidate cannot change', OLD.release_id
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
        IF NEW.status = 'validated' AND NOT EXISTS (
                SELECT 1 FROM validation_results WHERE release_id = NEW.release_id) THEN
            RAISE EXCEPTION 'release % cannot become validated: no validation result is recorded', OLD.release_id
                USING ERRCODE = 'TP001';
        END IF;
        IF NEW.status IN ('audited', 'awaiting_approval') THEN
            staged := EXISTS (SELECT 1 FROM staging.candidate_points WHERE release_id = NEW.release_id)
                   OR EXISTS (SELECT 1 FROM staging.candidate_fragments WHERE release_id = NEW.release_id);
            audited := EXISTS (SELECT 1 FROM audit_results WHERE release_id = NEW.release_id);
            IF NEW.status = 'audited' AND NOT audited AND staged
               AND (NEW.summary -> 'gate' ->> 'blocked') IS DISTINCT FROM 'true' THEN
                RAISE EXCEPTION 'release % cannot become audited: its staged candidate has no audit result',
                    OLD.release_id USING ERRCODE = 'TP001';
            END IF;
            IF NEW.status = 'awaiting_approval' AND NOT (staged AND audited) THEN
                RAISE EXCEPTION 'release % cannot await approval: it has no %', OLD.release_id,
                    CASE WHEN staged THEN 'audit result' ELSE 'staged candidate' END USING ERRCODE = 'TP001';
            END IF;
        END IF;
        IF NEW.status = 'published' AND NOT EXISTS (
                SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = 'published' AND c.relname = NEW.dataset || '__r' || NEW.release_id
                   AND c.relowner = 'trajpub_publisher'::regrole) THEN
            RAISE EXCEPTION 'release % is published only by governance.publish_release', OLD.release_id
                USING ERRCODE = 'TP001';
        END IF;
    END IF;
    RETURN NEW;
END $$;

-- 4. Ledger rows: in the release's dataset and the dataset's unit (read under a share lock on the dataset's
-- row, which a change of unit waits for); ε figures finite, unit_epsilon present exactly when the account has an
-- ε; a give-back only for a failed release whose mechanism never ran, mirroring its charge figure for figure.
-- (Rows from before this migration keep their history: the CHECK holds for new rows.)
ALTER TABLE governance.budget_ledger DROP CONSTRAINT IF EXISTS budget_ledger_figures_check;
ALTER TABLE governance.budget_ledger ADD CONSTRAINT budget_ledger_figures_check CHECK (
    (account = 'heuristic') = (unit_epsilon IS NULL) AND unit_delta IS NOT NULL
    AND epsilon > '-Infinity'::float8 AND epsilon < 'Infinity'::float8
    AND delta > '-Infinity'::float8 AND delta < 'Infinity'::float8
    AND (unit_epsilon IS NULL OR (unit_epsilon > '-Infinity'::float8 AND unit_epsilon < 'Infinity'::float8))
    AND unit_delta > '-Infinity'::float8 AND unit_delta < 'Infinity'::float8) NOT VALID;

CREATE OR REPLACE FUNCTION governance.check_ledger_release() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE
    rel record;
    unit_now text;
BEGIN
    SELECT dataset, status, mechanism_started_at INTO rel FROM releases WHERE release_id = NEW.release_id;
    IF rel.dataset IS DISTINCT FROM NEW.dataset THEN
        RAISE EXCEPTION 'release % is of dataset ''%'': its ledger rows cannot be in dataset ''%''',
            NEW.release_id, rel.dataset, NEW.dataset USING ERRCODE = 'TP001';
    END IF;
    SELECT privacy_unit INTO unit_now FROM datasets WHERE dataset = NEW.dataset FOR SHARE;
    IF NEW.unit IS DISTINCT FROM unit_now THEN
        RAISE EXCEPTION 'dataset ''%'' is accounted per %, not per %', NEW.dataset, unit_now, NEW.unit
            USING ERRCODE = 'TP001';
    END IF;
    IF NEW.entry_kind = 'release' AND NOT (rel.status = 'failed' AND rel.mechanism_started_at IS NULL AND EXISTS (
        SELECT 1 FROM budget_ledger c
         WHERE c.release_id = NEW.release_id AND c.entry_kind = 'charge' AND c.dataset = NEW.dataset
           AND c.account = NEW.account AND c.unit = NEW.unit AND c.epsilon = -NEW.epsilon AND c.delta = -NEW.delta
           AND c.unit_epsilon IS NOT DISTINCT FROM -NEW.unit_epsilon
           AND c.unit_delta IS NOT DISTINCT FROM -NEW.unit_delta)) THEN
        RAISE EXCEPTION 'release % cannot give its budget back: only a failed release whose mechanism never ran '
            'gives back exactly its charge (dataset, account, unit and figures)', NEW.release_id
            USING ERRCODE = 'TP001';
    END IF;
    RETURN NEW;
END $$;

-- 5. A steward's policy as the CLI allows it: finite positive ε caps (NaN and infinity refused), and the unit
-- of protection changes only while the dataset's ledger is empty.
ALTER TABLE governance.datasets DROP CONSTRAINT IF EXISTS datasets_caps_finite;
ALTER TABLE governance.datasets ADD CONSTRAINT datasets_caps_finite CHECK (
    epsilon_cap > 0 AND epsilon_cap < 'Infinity'::float8
    AND ldp_epsilon_cap > 0 AND ldp_epsilon_cap < 'Infinity'::float8
    AND pufferfish_epsilon_cap > 0 AND pufferfish_epsilon_cap < 'Infinity'::float8
    AND delta_cap >= 0 AND delta_cap < 1) NOT VALID;
DO $$
BEGIN  -- a cap set before this migration that breaks the rule is named, and refused at the dataset's next change
    ALTER TABLE governance.datasets VALIDATE CONSTRAINT datasets_caps_finite;
EXCEPTION WHEN check_violation THEN
    RAISE WARNING 'datasets with a cap that is not a positive finite number: %; set their caps with `trajpub budget cap`',
        (SELECT string_agg(dataset, ', ') FROM governance.datasets WHERE NOT (
            epsilon_cap > 0 AND epsilon_cap < 'Infinity'::float8 AND ldp_epsilon_cap > 0
            AND ldp_epsilon_cap < 'Infinity'::float8 AND pufferfish_epsilon_cap > 0
            AND pufferfish_epsilon_cap < 'Infinity'::float8 AND delta_cap >= 0 AND delta_cap < 1));
END $$;

CREATE OR REPLACE FUNCTION governance.enforce_unit_under_charges() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_temp AS $$
DECLARE n bigint;
BEGIN
    SELECT count(*) INTO n FROM budget_ledger WHERE dataset = OLD.dataset;
    IF n > 0 THEN
        RAISE EXCEPTION 'dataset ''%'' already has % ledger entries in its unit; the unit cannot change under them',
            OLD.dataset, n USING ERRCODE = 'TP001';
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS datasets_unit_under_charges ON governance.datasets;
CREATE TRIGGER datasets_unit_under_charges BEFORE UPDATE OF privacy_unit ON governance.datasets
    FOR EACH ROW WHEN (OLD.privacy_unit IS DISTINCT FROM NEW.privacy_unit)
    EXECUTE FUNCTION governance.enforce_unit_under_charges();
