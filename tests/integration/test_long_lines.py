"""A 10 MB line in a csv or T-Drive file is quarantined with the rest of the file loaded,
never a traceback."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.integration.conftest import cli

pytestmark = pytest.mark.integration
BIG = "x" * 10_000_000
GOOD = ["2008-02-02T10:00:00,116.30,39.90", "2008-02-02T10:01:00,116.31,39.91"]


@pytest.mark.parametrize(("fmt", "text", "options"), [
    ("csv", "object_id,t,lon,lat\n" + "".join(f"1,{g}\n" for g in GOOD) + f"2,{BIG},116.3,39.9\n",
     ["object_id=object_id", "t=t", "lon=lon", "lat=lat"]),
    ("csv", "object_id,t,lon,lat\n" + "".join(f"1,{g}\n" for g in GOOD) + f'2,"{BIG}",116.3,39.9\n',
     ["object_id=object_id", "t=t", "lon=lon", "lat=lat"]),
    ("tdrive", "1,2008-02-02 15:36:08,116.51172,39.92123\n1,2008-02-02 15:46:08,116.51135,39.93883\n" + BIG + "\n",
     []),
])
def test_a_10_mb_line_is_quarantined_and_the_rest_loaded(engine, dataset_name, tmp_path, fmt, text, options):
    path = tmp_path / ("big.csv" if fmt == "csv" else "1.txt")
    path.write_text(text)
    out = cli("load", fmt, str(path), "--dataset", dataset_name, *(a for o in options for a in ("--option", o)))
    assert out.returncode == 0 and "Traceback" not in out.stdout + out.stderr, out.stderr[-2000:]
    assert f"loaded 2 points into '{dataset_name}', quarantined 1 (of 3 read)" in out.stdout
    with engine.connect() as conn:
        n = conn.execute(sa.text("SELECT count(*) FROM raw.points WHERE dataset = :d"), {"d": dataset_name}).scalar()
    assert n == 2
