-- Raw points as loaded by `trajpub load`, one table for all datasets.
CREATE TABLE IF NOT EXISTS raw.datasets (
    dataset     text PRIMARY KEY CHECK (dataset ~ '^[a-z][a-z0-9_]{0,39}$'),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS raw.sources (
    source_id      bigserial PRIMARY KEY,
    dataset        text NOT NULL REFERENCES raw.datasets(dataset),
    format         text NOT NULL,
    path           text NOT NULL,
    sha256         text NOT NULL,
    n_read         bigint NOT NULL,
    n_loaded       bigint NOT NULL,
    n_quarantined  bigint NOT NULL,
    loaded_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (dataset, sha256)
);

CREATE TABLE IF NOT EXISTS raw.points (
    point_id     bigserial PRIMARY KEY,
    dataset      text NOT NULL REFERENCES raw.datasets(dataset),
    source_id    bigint NOT NULL REFERENCES raw.sources(source_id),
    source_line  bigint NOT NULL,
    object_id    text NOT NULL,
    t            timestamptz NOT NULL,
    geom         geometry(Point, 4326) NOT NULL
);
CREATE INDEX IF NOT EXISTS points_dataset_object_t_idx ON raw.points (dataset, object_id, t);
CREATE INDEX IF NOT EXISTS points_geom_gist ON raw.points USING gist (geom);

-- Rows that could not be loaded or failed validation: never dropped, always kept here with the reason.
CREATE TABLE IF NOT EXISTS staging.quarantine (
    quarantine_id  bigserial PRIMARY KEY,
    dataset        text NOT NULL,
    stage          text NOT NULL CHECK (stage IN ('load', 'validate')),
    source_id      bigint REFERENCES raw.sources(source_id),
    source_line    bigint,
    release_id     bigint,
    point_id       bigint,
    reason         text NOT NULL,
    record         text,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS quarantine_dataset_idx ON staging.quarantine (dataset, stage);
CREATE INDEX IF NOT EXISTS quarantine_release_idx ON staging.quarantine (release_id);
