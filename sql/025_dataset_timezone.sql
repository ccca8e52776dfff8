-- The dataset's local time zone (IANA name), recorded when its first source is loaded: the zone its people live
-- by, in which home/work inference reads night and working hours (audits/home_work.py) unless the gate policy
-- sets one. T-Drive and GeoLife are Beijing (GeoLife's files are in UTC, its people in Beijing); a CSV names its
-- zone with the timezone option. NULL: unknown, read as UTC. A public fact, not a statistic of the data.
ALTER TABLE governance.datasets ADD COLUMN IF NOT EXISTS timezone text;
UPDATE governance.datasets d SET timezone = 'Asia/Shanghai'
 WHERE timezone IS NULL AND EXISTS (SELECT 1 FROM raw.sources s WHERE s.dataset = d.dataset
                                     AND s.format IN ('tdrive', 'geolife'));
GRANT INSERT (timezone) ON governance.datasets TO trajpub_pipeline;
