-- Candidate releases awaiting review: the mechanism's output, kept until the steward decides.
CREATE TABLE IF NOT EXISTS staging.candidate_points (
    release_id  bigint NOT NULL REFERENCES governance.releases(release_id),
    traj_id     bigint NOT NULL,
    seq         integer NOT NULL,
    cell        bigint,
    t           timestamptz,
    geom        geometry(Point, 4326) NOT NULL,
    PRIMARY KEY (release_id, traj_id, seq)
);
GRANT SELECT, INSERT ON staging.candidate_points TO trajpub_pipeline;
GRANT SELECT ON staging.candidate_points TO trajpub_steward;
