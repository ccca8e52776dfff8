-- A release reads one window of its dataset (a scheduled release: the last week; docs/design.md, "Relative
-- windows"). Its snapshot (tasks/ingest.py) filters raw.points by dataset, point id and t, and no index served t
-- (the (dataset, object_id, t) btree needs the object first): every release read the whole table, so a weekly
-- release from a dataset holding a year cost as much as reading the year. A BRIN index on t is a few pages per
-- million rows and next to nothing per inserted row; as a feed appends week after week, each block range holds
-- one stretch of time, so a window reads the blocks of that window (bench/HISTORY_RESULTS.md).
CREATE INDEX IF NOT EXISTS points_t_brin ON raw.points USING brin (t);
