-- Points of interest (KLT's l-diversity and t-closeness over location semantics), public map data like the road
-- networks: one row per loaded POI set, its POIs with a category.
CREATE TABLE IF NOT EXISTS roads.poi_sets (
    poi_set      text PRIMARY KEY CHECK (poi_set ~ '^[a-z][a-z0-9_]{0,62}$'),
    source       text NOT NULL CHECK (source IN ('osm_pbf')),
    description  text NOT NULL,
    n_pois       integer NOT NULL CHECK (n_pois > 0),
    loaded_at    timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS roads.pois (
    poi_set   text NOT NULL REFERENCES roads.poi_sets(poi_set) ON DELETE CASCADE,
    poi_id    bigint NOT NULL,
    category  text NOT NULL,
    geom      geometry(Point, 4326) NOT NULL,
    PRIMARY KEY (poi_set, poi_id)
);
CREATE INDEX IF NOT EXISTS pois_geom_gist ON roads.pois USING gist (geom);
GRANT SELECT, INSERT, DELETE ON roads.poi_sets, roads.pois TO trajpub_pipeline;
GRANT SELECT ON roads.poi_sets, roads.pois TO trajpub_steward;
