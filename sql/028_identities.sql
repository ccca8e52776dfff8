-- Identities (docs/design.md, "Identities"; trajpub/identity.py has the same rule): who asked for a release and who
-- decided on it are compared in a canonical form, NFKC then lower case, and that form may hold only ASCII letters,
-- digits, '_', '.' and '-', starting with a letter, at most 63 characters. Lookalikes of a name either become the
-- name (fullwidth letters) or are refused (zero-width and other invisible characters, spaces, controls,
-- combining marks, letters of other scripts), so four-eyes cannot be passed by a name that only looks different.
-- A release's requested_by is a registered requester (governance.requesters, written by the operator) or a
-- steward's login: a reference to a person, not free text.

-- The canonical identity of a name, or NULL when it is not one.
CREATE OR REPLACE FUNCTION governance.identity_key(p_name text) RETURNS text LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN n ~ '^[A-Za-z][A-Za-z0-9_.-]{0,62}$' THEN lower(n COLLATE "C") END
      FROM (SELECT normalize(p_name, NFKC) AS n) s
$$;
GRANT EXECUTE ON FUNCTION governance.identity_key(text) TO trajpub_pipeline, trajpub_steward;

-- The canonical identity of a name, or a refusal (TP001) naming what is wrong in one sentence: the first
-- character that is not allowed, by its code point (an invisible character would not show in the message).
CREATE OR REPLACE FUNCTION governance.canonical_identity(p_name text, p_what text) RETURNS text LANGUAGE plpgsql IMMUTABLE
SET search_path = governance, pg_catalog, pg_temp AS $$
DECLARE
    key text := identity_key(p_name);
    c text;
    i integer := 0;
BEGIN
    IF key IS NOT NULL THEN
        RETURN key;
    END IF;
    IF coalesce(p_name, '') = '' THEN
        RAISE EXCEPTION '% is empty: every release names who asked for it (a registered requester or a steward''s '
            'login)', p_what USING ERRCODE = 'TP001';
    END IF;
    FOREACH c IN ARRAY regexp_split_to_array(p_name, '') LOOP
        i := i + 1;
        IF normalize(c, NFKC) !~ '^[A-Za-z0-9_.-]+$' THEN
            RAISE EXCEPTION '% has U+% at position %, which an identity may not hold: ASCII letters, digits, '
                '''_'', ''.'' and ''-'' only (after NFKC)', p_what, upper(lpad(to_hex(ascii(c)), 4, '0')), i
                USING ERRCODE = 'TP001';
        END IF;
    END LOOP;
    RAISE EXCEPTION '% % is not an identity: it starts with a letter and has at most 63 characters', p_what,
        quote_literal(p_name) USING ERRCODE = 'TP001';
END $$;
GRANT EXECUTE ON FUNCTION governance.canonical_identity(text, text) TO trajpub_pipeline, trajpub_steward;

-- The people who may ask for releases besides the stewards, registered by the operator (`trajpub requester
-- add NAME`, as the superuser; the database records who registered them).
CREATE TABLE IF NOT EXISTS governance.requesters (
    name           text PRIMARY KEY CHECK (name = governance.identity_key(name)),
    registered_by  text NOT NULL DEFAULT session_user,
    registered_at  timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON governance.requesters FROM PUBLIC;
GRANT SELECT ON governance.requesters TO trajpub_pipeline, trajpub_steward;

-- Whether a canonical identity is a registered requester or a steward's login (a login role in
-- trajpub_steward, the superuser aside).
CREATE OR REPLACE FUNCTION governance.registered_person(p_identity text) RETURNS boolean LANGUAGE sql STABLE
SECURITY DEFINER SET search_path = governance, pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM requesters WHERE name = p_identity)
        OR EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolcanlogin AND NOT r.rolsuper
                      AND identity_key(r.rolname) = p_identity AND pg_has_role(r.oid, 'trajpub_steward', 'MEMBER'))
$$;
REVOKE ALL ON FUNCTION governance.registered_person(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION governance.registered_person(text) TO trajpub_pipeline, trajpub_steward;

-- A new release records its requester canonically, and only a registered one (the releases_rules trigger of
-- sql/015 keeps it from changing afterwards).
CREATE OR REPLACE FUNCTION governance.enforce_requester() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_catalog, pg_temp AS $$
BEGIN
    NEW.requested_by := canonical_identity(NEW.requested_by, 'requested_by');
    IF NOT registered_person(NEW.requested_by) THEN
        RAISE EXCEPTION 'requested_by ''%'' is neither a registered requester nor a steward''s login (the operator '
            'registers requesters: trajpub requester add NAME)', NEW.requested_by USING ERRCODE = 'TP001';
    END IF;
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS releases_requester ON governance.releases;
CREATE TRIGGER releases_requester BEFORE INSERT ON governance.releases
    FOR EACH ROW EXECUTE FUNCTION governance.enforce_requester();

-- Four-eyes compares identities: a decision is recorded only for a login that is an identity, and under
-- four-eyes an approval is refused when the approving login is the requester's identity, or when the requester
-- is not an identity at all (a release recorded before this rule: who asked cannot be told apart; fail closed).
CREATE OR REPLACE FUNCTION governance.enforce_four_eyes() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path = governance, pg_catalog, pg_temp AS $$
DECLARE
    decider text := canonical_identity(NEW.steward, 'the deciding login');
    requester text;
    four_eyes_on boolean;
BEGIN
    IF NEW.decision <> 'approved' THEN
        RETURN NEW;
    END IF;
    SELECT r.requested_by, d.four_eyes INTO requester, four_eyes_on
      FROM releases r JOIN datasets d USING (dataset) WHERE r.release_id = NEW.release_id;
    IF four_eyes_on AND identity_key(requester) IS NULL THEN
        RAISE EXCEPTION 'four-eyes policy: release %''s requester % is not an identity, so no login can be told '
            'apart from it; the release cannot be approved', NEW.release_id, quote_literal(requester)
            USING ERRCODE = 'TP001';
    END IF;
    IF four_eyes_on AND identity_key(requester) = decider THEN
        RAISE EXCEPTION 'four-eyes policy: % requested release % and cannot approve it; another steward must',
            decider, NEW.release_id USING ERRCODE = 'TP001';
    END IF;
    RETURN NEW;
END $$;
