-- Road networks as first-class data ((k-Psi)-anonymity, Chen, Li, Zhang 2020), aggregate candidates
-- (FASTPub fragments, Wang et al. 2022), and the private side of releases whose published rows hide which one is real.

-- roads.networks: one row per loaded network. `derived_from_trajectories` networks are allowed only when the
-- derivation was differentially private and charged to the dataset's budget (`epsilon` then records it).
CREATE SCHEMA IF NOT EXISTS roads;
CREATE TABLE IF NOT EXISTS roads.networks (
    network      text PRIMARY KEY CHECK (network ~ '^[a-z][a-z0-9_]{0,62}$'),
    source       text NOT NULL CHECK (source IN ('osm_pbf', 'synthetic_grid', 'trajectories_dp')),
    description  text NOT NULL,
    params       jsonb NOT NULL DEFAULT '{}'::jsonb,
    epsilon      double precision CHECK (epsilon IS NULL OR epsilon > 0),
    n_edges      integer NOT NULL CHECK (n_edges > 0),
    loaded_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((source = 'trajectories_dp') = (epsilon IS NOT NULL))
);
CREATE TABLE IF NOT EXISTS roads.edges (
    network     text NOT NULL REFERENCES roads.networks(network) ON DELETE CASCADE,
    edge_id     bigint NOT NULL,
    source      bigint NOT NULL,
    target      bigint NOT NULL,
    length_m    double precision NOT NULL CHECK (length_m >= 0),
    road_class  text,
    geom        geometry(LineString, 4326) NOT NULL,
    PRIMARY KEY (network, edge_id)
);
CREATE INDEX IF NOT EXISTS edges_geom_gist ON roads.edges USING gist (geom);
GRANT USAGE ON SCHEMA roads TO trajpub_pipeline, trajpub_steward;
GRANT SELECT, INSERT, DELETE ON roads.networks, roads.edges TO trajpub_pipeline;
GRANT SELECT ON roads.networks, roads.edges TO trajpub_steward;

-- Anonymity sets: the published trajectories of one set share a set_id.
ALTER TABLE staging.candidate_points ADD COLUMN IF NOT EXISTS set_id bigint;

-- Which released trajectory is an object's own (k-Psi: the real member of each set). Private: the consumer
-- role has no access to `staging`, and publication never copies this table.
CREATE TABLE IF NOT EXISTS staging.candidate_owners (
    release_id      bigint NOT NULL REFERENCES governance.releases(release_id),
    traj_id         bigint NOT NULL,
    object_id       text NOT NULL,
    source_traj_id  bigint NOT NULL,
    PRIMARY KEY (release_id, traj_id)
);
GRANT SELECT, INSERT ON staging.candidate_owners TO trajpub_pipeline;

-- Aggregate candidates: frequent fragments (cell sequences through cell centres) with estimated counts.
CREATE TABLE IF NOT EXISTS staging.candidate_fragments (
    release_id       bigint NOT NULL REFERENCES governance.releases(release_id),
    fragment_id      bigint NOT NULL,
    cells            bigint[] NOT NULL CHECK (cardinality(cells) >= 1),
    estimated_count  double precision NOT NULL,
    round            integer NOT NULL CHECK (round >= 1),
    geom             geometry(Geometry, 4326) NOT NULL,
    PRIMARY KEY (release_id, fragment_id)
);
GRANT SELECT, INSERT ON staging.candidate_fragments TO trajpub_pipeline;
GRANT SELECT ON staging.candidate_fragments TO trajpub_steward;

-- The steward's review report of each release: one self-contained HTML page (plots inlined), kept with the
-- release so that the file on disk is a copy, not the record.
CREATE TABLE IF NOT EXISTS governance.review_reports (
    release_id  bigint PRIMARY KEY REFERENCES governance.releases(release_id),
    html        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT ON governance.review_reports TO trajpub_pipeline;
GRANT SELECT ON governance.review_reports TO trajpub_steward;
