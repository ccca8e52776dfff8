-- Schemas, PostGIS and the roles of docs/design.md (pipeline, steward, consumer; the owner runs migrations).
-- Idempotent: every statement can run again without effect.
CREATE EXTENSION IF NOT EXISTS postgis;

CREATE SCHEMA IF NOT EXISTS raw;
CREATE SCHEMA IF NOT EXISTS staging;
CREATE SCHEMA IF NOT EXISTS published;
CREATE SCHEMA IF NOT EXISTS governance;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trajpub_pipeline') THEN
        CREATE ROLE trajpub_pipeline NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trajpub_steward') THEN
        CREATE ROLE trajpub_steward NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'trajpub_consumer') THEN
        CREATE ROLE trajpub_consumer NOLOGIN;
    END IF;
END
$$;

-- Nobody but the owner sees anything by default.
REVOKE ALL ON SCHEMA raw, staging, governance FROM PUBLIC;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
