-- A full city's load (15 M points, issue 17) spent most of its INSERT in per-row work that buys nothing:
-- measured on 402k points, 2 busy cores: no index 1.3 s, + the (dataset, object_id, t) btree 4.4 s, + the GiST
-- index on geom 5.5 s, + the primary key 1.8 s, + the foreign key to raw.sources 4.8 s (one SPI look-up per row).
--
-- 1. No query reads raw.points by location (partitions are read by dataset, object and point id; validation
--    checks the bbox on the workers), so its GiST index goes.
-- 2. The foreign key raw.points.source_id -> raw.sources is kept as the same rule checked once per statement
--    on the rows the statement changed (a join with the transition table instead of one look-up per row): a
--    point must name an existing source, and a source that points still name cannot go.
DROP INDEX IF EXISTS raw.points_geom_gist;
ALTER TABLE raw.points DROP CONSTRAINT IF EXISTS points_source_id_fkey;

CREATE OR REPLACE FUNCTION raw.points_name_sources() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    missing bigint;
BEGIN
    SELECT n.source_id INTO missing FROM (SELECT DISTINCT source_id FROM changed_points) n
     WHERE NOT EXISTS (SELECT 1 FROM raw.sources s WHERE s.source_id = n.source_id) LIMIT 1;
    IF FOUND THEN
        RAISE foreign_key_violation USING
            MESSAGE = format('raw.points names source %s, which is not in raw.sources', missing),
            CONSTRAINT = 'points_source_id_fkey';
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION raw.sources_not_named_by_points() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    named bigint;
BEGIN
    SELECT o.source_id INTO named FROM (SELECT DISTINCT source_id FROM changed_sources) o
     WHERE NOT EXISTS (SELECT 1 FROM raw.sources s WHERE s.source_id = o.source_id)
       AND EXISTS (SELECT 1 FROM raw.points p WHERE p.source_id = o.source_id) LIMIT 1;
    IF FOUND THEN
        RAISE foreign_key_violation USING
            MESSAGE = format('source %s is still named by raw.points', named),
            CONSTRAINT = 'points_source_id_fkey';
    END IF;
    RETURN NULL;
END $$;

-- a trigger with a transition table has one event: one trigger per event
DROP TRIGGER IF EXISTS points_name_sources_insert ON raw.points;
CREATE TRIGGER points_name_sources_insert AFTER INSERT ON raw.points
    REFERENCING NEW TABLE AS changed_points FOR EACH STATEMENT EXECUTE FUNCTION raw.points_name_sources();
DROP TRIGGER IF EXISTS points_name_sources_update ON raw.points;
CREATE TRIGGER points_name_sources_update AFTER UPDATE ON raw.points
    REFERENCING NEW TABLE AS changed_points FOR EACH STATEMENT EXECUTE FUNCTION raw.points_name_sources();
DROP TRIGGER IF EXISTS sources_not_named_delete ON raw.sources;
CREATE TRIGGER sources_not_named_delete AFTER DELETE ON raw.sources
    REFERENCING OLD TABLE AS changed_sources FOR EACH STATEMENT EXECUTE FUNCTION raw.sources_not_named_by_points();
DROP TRIGGER IF EXISTS sources_not_named_update ON raw.sources;
CREATE TRIGGER sources_not_named_update AFTER UPDATE ON raw.sources
    REFERENCING OLD TABLE AS changed_sources FOR EACH STATEMENT EXECUTE FUNCTION raw.sources_not_named_by_points();
