-- Generalised releases (GLOVE, KLT): a released sample is a region and a time span, not a point. The candidate
-- keeps the region (a lon/lat rectangle) and the end of the span (t is its start); geom stays the region's centre.
ALTER TABLE staging.candidate_points ADD COLUMN IF NOT EXISTS t_end timestamptz;
ALTER TABLE staging.candidate_points ADD COLUMN IF NOT EXISTS region geometry(Polygon, 4326);
ALTER TABLE staging.candidate_points DROP CONSTRAINT IF EXISTS candidate_points_span_ordered;
ALTER TABLE staging.candidate_points ADD CONSTRAINT candidate_points_span_ordered CHECK (t_end IS NULL OR t_end >= t);
