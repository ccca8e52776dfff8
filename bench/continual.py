"""A year of the shipped weekly deployment, measured (docs/design.md, "Units of protection per period" and
"Relative windows").

The data: the first 40 taxis of the shipped T-Drive sample as a weekly feed (:mod:`bench.weeks`): week ``k`` is
the sample's week (Saturday 2 to Friday 8 February 2008, Beijing time) shifted by ``k`` weeks with the same taxi
ids, i.e. the same 40 people every week. 53 copies (k = 0..52) are loaded so that each of the 52 Monday-to-Monday
Beijing weeks the deployment releases (4 February 2008 to 2 February 2009) is whole: Monday to Friday of copy
``k``, Saturday and Sunday of copy ``k + 1``.

The deployment: ``tdrive-weekly`` of ``prefect.yaml`` as shipped (ObjTrace, ε 5 per taxi, window ``{last: 7d,
align: local_week}``), registered under another name with only its dataset changed (its schedule inactive), served
by a ``prefect worker`` on the ``trajpub`` process pool. Per unit of protection, one dataset:

- ``object-week``: ``budget unit D object --period week``, ``budget cap D 10``: ε 10 per taxi-week;
- ``w-event``: ``budget unit D object --period week --w-event 4``, ``budget cap D 10``: ε 10 per taxi over any
  4 consecutive weeks.

The steward (a login of its own) sets the unit, the cap and the small-fleet gate policy (the default's controls
need 30 taxis; 40 taxis give 12: the policy the integration tests set for this subset) with the CLI. Before the
year: the forecast (``budget show --forecast``) and the bill of the whole year as one backfill (asked, answered
no). Then the year as the schedule would have run it, one week after another: ``trajpub backfill
release/NAME --start MONDAY --end NEXT_MONDAY --every 7d --yes`` (priced, refused over a cap with nothing started),
and for a release that reaches the steward, ``trajpub approve ID --steward LOGIN``. Each week's outcome is
compared with the pattern the caps' arithmetic predicts (:func:`expected_pattern`, computed here from the unit and
the caps alone).

RetraSyn (Hu et al., "Real-Time Trajectory Synthesis with Local Differential Privacy", ICDE 2024;
github.com/ZJU-DAILY/RetraSyn, cloned into the git-ignored ``bench/ref/RetraSyn``, never copied here) runs on the
same weeks through :func:`run_retrasyn`, and both are scored by :func:`audits.trajectory_utility.trajectory_metrics`.

    python -m bench.continual year --unit object-week [--weeks 52] [--until 02:40]
    python -m bench.continual retrasyn [--weeks 52]
    python -m bench.continual render        # bench/CONTINUAL_RESULTS.md from bench/continual/*.json
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import pickle
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import sqlalchemy as sa
import yaml

from bench import utility_data, weeks
from bench.fgs_pufferfish import machine

ROOT = Path(__file__).resolve().parent
PROJECT = ROOT.parent
OUT = ROOT / "out" / "continual"
RESULTS = ROOT / "continual"
RESULTS_MD = ROOT / "CONTINUAL_RESULTS.md"
SCORES = RESULTS / "scores.json"
STEWARD = "yearbench"
REQUESTER = "scheduler"  # the shipped spec's requested_by
SHIPPED = "tdrive-weekly"
FIRST_MONDAY = date(2008, 2, 4)
TIMEZONE = "Asia/Shanghai"
BBOX = utility_data.TDRIVE_BBOX
GRID = 32
REF = ROOT / "ref" / "RetraSyn"
RETRASYN = {"epsilon": 1.0, "grid_num": 6, "w": 20}
"""RetraSyn's own settings: the README's example (ε 1, a 6 x 6 grid, window w = 20 timestamps)."""
SLOT = pd.Timedelta(minutes=12)
SLOTS = 7 * 24 * 5
RETRASYN_UNIT = "w-event ε-LDP per taxi over any w consecutive 12-minute timestamps"
BEGIN, END = "<!-- continual:begin -->", "<!-- continual:end -->"


@dataclass(frozen=True)
class Unit:
    """A per-period unit of protection and its cap: ``w`` weeks share ``cap`` (1: each week its own)."""

    name: str
    w: int
    cap: float

    def cli(self, dataset: str) -> list[list[str]]:
        """The steward's commands that set it."""
        event = ["--w-event", str(self.w)] if self.w > 1 else []
        return [["budget", "unit", dataset, "object", "--period", "week", *event, "--steward", STEWARD],
                ["budget", "cap", dataset, f"{self.cap:g}", "--steward", STEWARD]]

    def describe(self) -> str:
        return (f"object per week, cap ε {self.cap:g} per taxi-week" if self.w == 1 else
                f"w-event (week, {self.w}), cap ε {self.cap:g} per taxi over any {self.w} consecutive weeks")


UNITS = {"object-week": Unit("object-week", 1, 10.0), "w-event": Unit("w-event", 4, 10.0)}


def fits(charged: dict[int, float], week: int, epsilon: float, cap: float, w: int) -> bool:
    """Whether a release of ``epsilon`` in ``week`` fits beside the weeks already ``charged`` (week -> ε): every run
    of ``w`` consecutive weeks containing it keeps its charged total, this one included, within ``cap`` (w = 1: the
    week alone; docs/operations.md, "Data and budgets")."""
    return all(sum(charged.get(j, 0.0) for j in range(s, s + w)) + epsilon <= cap for s in range(week - w + 1, week + 1))


def expected_pattern(n_weeks: int, epsilon: float, cap: float, w: int) -> list[bool]:
    """Which of ``n_weeks`` weekly releases of ``epsilon`` each, asked in order, the caps let through (:func:`fits`;
    a refused week charges nothing). Computed from the unit and the cap alone, to check the ledger's outcome
    against."""
    charged: dict[int, float] = {}
    for week in range(n_weeks):
        if fits(charged, week, epsilon, cap, w):
            charged[week] = epsilon
    return [week in charged for week in range(n_weeks)]


def cli(*args: str, stdin: str | None = None, timeout: float = 3600) -> dict:
    """Run ``trajpub ARGS`` as a steward or operator would; its exit code, output and wall seconds."""
    began = time.perf_counter()
    done = subprocess.run([str(PROJECT / ".venv" / "bin" / "trajpub"), *args], cwd=PROJECT, input=stdin,
                          capture_output=True, text=True, timeout=timeout, check=False)
    return {"args": list(args), "rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr,
            "wall_s": time.perf_counter() - began}


def must(result: dict) -> dict:
    if result["rc"] != 0:
        raise SystemExit(f"trajpub {' '.join(result['args'])} failed: {result['stderr'].strip()[-500:]}")
    return result


def prefect(*args: str) -> None:
    done = subprocess.run([str(PROJECT / ".venv" / "bin" / "prefect"), *args], cwd=PROJECT, capture_output=True,
                          text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise SystemExit(f"prefect {' '.join(args)} failed: {(done.stdout + done.stderr)[-800:]}")


def deploy(name: str, dataset: str) -> dict:
    """Register the shipped weekly deployment as ``release/NAME`` with only its dataset changed and its schedule
    inactive (the backfill runs the weeks); returns its spec."""
    shipped = yaml.safe_load((PROJECT / "prefect.yaml").read_text())
    entry = next(d for d in shipped["deployments"] if d["name"] == SHIPPED)
    spec = {**entry["parameters"]["spec"], "dataset": dataset}
    entry = {**entry, "name": name, "parameters": {"spec": spec},
             "schedules": [{**s, "active": False} for s in entry["schedules"]]}
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**shipped, "deployments": [entry]}, sort_keys=False))
    prefect("--no-prompt", "deploy", "--all", "--prefect-file", str(path))
    return spec


def small_fleet_policy(path: Path) -> Path:
    """The shipped default gate policy with controls measured on 10 objects, intervals up to 1 wide, decided on the
    point estimate (the integration tests' policy for this 40-taxi subset: 12 controls), every attack kept; of the
    synthetic utility floor only ``outside_bbox_share``: the density, trip and pattern floors were set on 300 taxis
    and ObjTrace at ε 5 on 40 taxis misses them (the first try's week 1: pattern F1 0.14, trip 0.52, density 0.52),
    so every week would be blocked and nothing would reach the steward. The bench scores those figures itself."""
    policy = yaml.safe_load((PROJECT / "audits" / "policies" / "default.yaml").read_text())
    policy["controls"] = {**policy["controls"], "min_objects": 10, "max_risk_ci_width": 1.0}
    policy["decide_on"] = "point"
    policy["utility"]["synthetic"] = {"outside_bbox_share": policy["utility"]["synthetic"]["outside_bbox_share"]}
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path


def local(d: date) -> datetime:
    from zoneinfo import ZoneInfo

    return datetime(d.year, d.month, d.day, tzinfo=ZoneInfo(TIMEZONE))


def release_of(eng: sa.Engine, dataset: str, start: datetime) -> dict | None:
    """The release of the week starting at ``start`` and the times of its transitions."""
    with eng.connect() as conn:
        rel = conn.execute(sa.text(
            "SELECT release_id, status, published_table, created_at FROM governance.releases WHERE dataset = :d"
            " AND window_start = :s ORDER BY release_id DESC LIMIT 1"), {"d": dataset, "s": start}).mappings().first()
        if rel is None:
            return None
        steps = conn.execute(sa.text(
            "SELECT to_status, min(at) AS at FROM governance.release_transitions WHERE release_id = :r"
            " GROUP BY to_status"), {"r": rel["release_id"]}).all()
        charge = conn.execute(sa.text(
            "SELECT coalesce(sum(epsilon), 0) FROM governance.budget_ledger WHERE release_id = :r"),
            {"r": rel["release_id"]}).scalar()
    at = {s.to_status: s.at for s in steps}
    reached = at.get("awaiting_approval") or at.get("blocked") or at.get("failed")
    return {**rel, "charged": float(charge),
            "to_steward_s": (reached - rel["created_at"]).total_seconds() if reached else None,
            "to_published_s": (at["published"] - rel["created_at"]).total_seconds() if "published" in at else None}


def export(eng: sa.Engine, table: str, path: Path) -> int:
    """A published release's points (``published_table``: ``published.NAME``) as ``traj_id, seq, t, lon, lat``,
    what a consumer reads."""
    schema, name = table.split(".", 1)
    with eng.connect() as conn:
        frame = pd.read_sql(sa.text(f'SELECT traj_id, seq, t, ST_X(geom) AS lon, ST_Y(geom) AS lat '
                                    f'FROM "{schema}"."{name}" ORDER BY traj_id, seq'), conn)
    frame.to_csv(path, index=False)
    return len(frame)


def year(unit: Unit, n_weeks: int, taxis: int, until: datetime | None) -> dict:
    """Load the year, set the unit, register the deployment, forecast, bill, then run the weeks in order."""
    from tasks import db

    tag = uuid.uuid4().hex[:6]
    dataset, name = f"year_{unit.name.replace('-', '_')}_{tag}", f"year-{unit.name}-{tag}"
    eng = db.engine()
    began = time.perf_counter()
    loads = weeks.load_weeks(eng, dataset, weeks.sample(taxis), range(n_weeks + 1), lambda s: print(s, flush=True))
    load_s = time.perf_counter() - began
    for args in unit.cli(dataset):
        must(cli(*args))
    OUT.mkdir(parents=True, exist_ok=True)
    must(cli("policy", "set", dataset, str(small_fleet_policy(OUT / "small_fleet.yaml")), "--name", "small_fleet",
             "--steward", STEWARD))
    spec = deploy(name, dataset)
    forecast = cli("budget", "show", "--forecast", f"release/{name}", "--periods", "12")
    end = FIRST_MONDAY + timedelta(weeks=n_weeks)
    bill = cli("backfill", f"release/{name}", "--start", FIRST_MONDAY.isoformat(), "--end", end.isoformat(),
               "--every", "7d", stdin="n\n")
    expected = expected_pattern(n_weeks, float(spec["params"]["epsilon"]), unit.cap, unit.w)
    rows: list[dict] = []
    result = {"unit": unit.name, "describe": unit.describe(), "dataset": dataset, "deployment": name,
              "taxis": taxis, "weeks_asked": n_weeks, "spec": spec, "machine": machine(),
              "load_average": os.getloadavg(), "load_s": load_s, "points": sum(n for _, n, _ in loads),
              "weeks_loaded": len(loads), "forecast": forecast["stdout"] + forecast["stderr"],
              "bill": {"rc": bill["rc"], "stdout": bill["stdout"], "stderr": bill["stderr"]},
              "expected": ["charged" if e else "refused" for e in expected], "rows": rows, "year_s": 0.0,
              "commit": commit(PROJECT)}
    RESULTS.mkdir(exist_ok=True)
    return run_weeks(eng, unit, result, until)


def resume(unit: Unit, until: datetime | None) -> dict:
    """Go on with a year stopped early (``--until``, or a session's end): the weeks of its results file not run
    yet, in order, on the same dataset and deployment, each expected as the year's pattern says."""
    from tasks import db

    result = json.loads((RESULTS / f"{unit.name}.json").read_text())
    return run_weeks(db.engine(), unit, result, until)


def run_weeks(eng: sa.Engine, unit: Unit, result: dict, until: datetime | None) -> dict:
    """Run the weeks of ``result`` not run yet, in order, writing the results file after every week; exit 1 if an
    outcome differs from the caps' arithmetic."""
    rows, done = result["rows"], {r["week"] for r in result["rows"]}
    spent, began = result["year_s"], time.perf_counter()
    for week in range(1, result["weeks_asked"] + 1):
        if week in done:
            continue
        if until and datetime.now(UTC) > until:
            print(f"stopped before week {week}: past {until:%H:%M} UTC", flush=True)
            break
        row = run_week(eng, result["dataset"], result["deployment"], week, result["expected"][week - 1])
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "refusal"}, default=str), flush=True)
        result = {**result, "rows": rows, "year_s": spent + time.perf_counter() - began}
        (RESULTS / f"{unit.name}.json").write_text(json.dumps(result, indent=1, default=str))  # after every week
    wrong = mismatches(result)
    if wrong:
        raise SystemExit(f"{unit.name}: outcomes differ from the caps' arithmetic: " + "; ".join(wrong))
    return result


def run_week(eng: sa.Engine, dataset: str, name: str, week: int, expected: str) -> dict:
    """One week as the schedule would have run it: the backfill of that week (priced, refused over a cap with nothing
    started), then the steward's approval of a release that reaches them; its outcome and times."""
    monday = FIRST_MONDAY + timedelta(weeks=week - 1)
    began = time.perf_counter()
    rel = release_of(eng, dataset, local(monday))  # a week whose run was interrupted is taken up, not run again
    backfill = {"rc": 0, "stderr": "", "wall_s": None} if rel else cli(
        "backfill", f"release/{name}", "--start", monday.isoformat(), "--end",
        (monday + timedelta(weeks=1)).isoformat(), "--every", "7d", "--yes")
    rel = rel or release_of(eng, dataset, local(monday))
    approve = None
    if rel and rel["status"] == "awaiting_approval":
        approve = cli("approve", str(rel["release_id"]), "--steward", STEWARD, "--comment",
                      "year bench: guarantee and audit reviewed", "--wait", "600")
        rel = release_of(eng, dataset, local(monday))
    row = {"week": week, "monday": monday.isoformat(), "expected": expected, "commit": commit(PROJECT),
           "backfill_rc": backfill["rc"],
           "backfill_s": backfill["wall_s"],
           "refusal": backfill["stderr"].strip().splitlines()[-1] if backfill["rc"] and not rel else None,
           "approve_s": approve["wall_s"] if approve else None, "week_s": time.perf_counter() - began,
           "taken_up": backfill["wall_s"] is None}
    if rel:
        row |= {k: rel[k] for k in ("release_id", "status", "charged", "to_steward_s", "to_published_s")}
        if rel["status"] == "published":
            row["file"] = f"{dataset}_week{week:02d}.csv.gz"
            row["points"] = export(eng, rel["published_table"], OUT / row["file"])
    row["outcome"] = "charged" if rel and row["charged"] > 0 else "refused"
    return row


def one_week(unit: Unit, week: int) -> dict:
    """One more week of a year already run (e.g. week 52 after a year stopped early), out of order: expected from
    the weeks its ledger charged (:func:`fits`), its row added to the unit's results."""
    from tasks import db

    path = RESULTS / f"{unit.name}.json"
    result = json.loads(path.read_text())
    charged = {r["week"]: float(r["charged"]) for r in result["rows"] if r["outcome"] == "charged"}
    expected = fits(charged, week, float(result["spec"]["params"]["epsilon"]), unit.cap, unit.w)
    row = run_week(db.engine(), result["dataset"], result["deployment"], week, "charged" if expected else "refused")
    result["rows"].append({**row, "out_of_order": True})
    print(json.dumps({k: v for k, v in row.items() if k != "refusal"}, default=str), flush=True)
    path.write_text(json.dumps(result, indent=1, default=str))
    return result


def week_records(points: pd.DataFrame, week: int) -> pd.DataFrame:
    """The raw records of week ``week`` (1-based: the Monday-to-Monday Beijing week from :data:`FIRST_MONDAY`) of
    the feed, cleaned as the utility benchmarks clean (:func:`bench.utility_data.clean`)."""
    both = pd.concat([weeks.shifted(points, week - 1), weeks.shifted(points, week)])
    t = pd.to_datetime(both["datetime"]).dt.tz_localize(TIMEZONE).dt.tz_convert("UTC")
    start = local(FIRST_MONDAY + timedelta(weeks=week - 1))
    inside = ((t >= start) & (t < start + timedelta(weeks=1))).to_numpy()
    frame = pd.DataFrame({"object_id": both["taxi_id"].astype(str).to_numpy(), "t": t.to_numpy(),
                          "lon": both["longitude"].to_numpy(), "lat": both["latitude"].to_numpy()})[inside]
    return utility_data.clean(frame.assign(t=pd.to_datetime(frame["t"], utc=True)), BBOX)


def transitions(records: pd.DataFrame, start: datetime) -> list[list[tuple]]:
    """RetraSyn's input (its README, "Dataset Format", ``{dataset}_transition.xz``): per timestamp (a slot of
    :data:`SLOT` from ``start``) the list of ``(x0, y0, x1, y1, flag)``, one per taxi reporting then: its last
    position of the previous slot and of this one (flag 0), entering (flag 1: it had no point in the previous
    slot) or quitting (flag 2: the slot after its last one, within the week). Positions are lon/lat."""
    slot = ((records["t"] - start) // SLOT).astype(int).to_numpy()
    frame = records.assign(slot=slot).sort_values(["object_id", "t"]).groupby(["object_id", "slot"]).last()
    stream: list[list[tuple]] = [[] for _ in range(SLOTS)]
    for _, taxi in frame.groupby(level="object_id"):
        at = {s: (lon, lat) for s, lon, lat in zip(taxi.index.get_level_values("slot"), taxi["lon"], taxi["lat"],
                                                     strict=True)}
        for s, (x, y) in at.items():
            stream[s].append((*at[s - 1], x, y, 0) if s - 1 in at else (x, y, x, y, 1))
            if s + 1 not in at and s + 1 < SLOTS:  # no report after the week
                stream[s + 1].append((x, y, x, y, 2))
    return stream


def run_retrasyn(records: pd.DataFrame, start: datetime) -> tuple[pd.DataFrame, float, dict]:
    """RetraSyn's budget-division code (``code/RetraSyn_b.py``, method ``retrasyn``) on one week: our stream written
    as its ``data/tdrive_transition.xz`` (its code knows the name ``tdrive`` only, and stops at its 886
    timestamps: a week of 12-minute slots is 840), run from its ``code`` folder with its own arguments; its output
    (trajectories of ``(x, y, timestamp)``) back as records with ``t`` = the slot's middle."""
    code = REF / "code"
    stream = transitions(records, start)
    kept = [s for s, reports in enumerate(stream) if reports]  # its budget recycling indexes its budgets by
    with lzma.open(REF / "data" / "tdrive_transition.xz", "wb") as f:  # timestamp and fails on an empty one
        pickle.dump([stream[s] for s in kept], f)
    (REF / "data" / "syn_data" / "tdrive").mkdir(parents=True, exist_ok=True)
    output = REF / "data" / "syn_data" / "tdrive" / f"retrasyn_{RETRASYN['epsilon']}_g{RETRASYN['grid_num']}_w" \
        f"{RETRASYN['w']}.pkl"
    output.unlink(missing_ok=True)
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "RetraSyn_b.py", "--dataset", "tdrive", "--method", "retrasyn",
                           *(f"--{k}={v}" for k, v in RETRASYN.items())], cwd=code, capture_output=True, text=True,
                          check=False)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"RetraSyn failed: {done.stderr[-1500:]}")
    with output.open("rb") as f:
        synthetic = pickle.load(f)
    rows = [(i, j, x, y, s) for i, traj in enumerate(synthetic) for j, (x, y, s) in enumerate(traj)]
    frame = pd.DataFrame(rows, columns=["traj_id", "seq", "lon", "lat", "slot"])
    frame["t"] = start + SLOT * np.asarray(kept)[frame["slot"].to_numpy()] + SLOT / 2
    reports = [len(s) for s in stream]
    return frame.drop(columns="slot"), wall, {"empty_slots": sum(1 for n in reports if n == 0),
                                              "reports": sum(reports)}


def retrasyn(n_weeks: int, taxis: int) -> dict:
    """RetraSyn on every week of the year (:func:`run_retrasyn`), each output kept for scoring."""
    points = weeks.sample(taxis)
    rows = []
    OUT.mkdir(parents=True, exist_ok=True)
    for week in range(1, n_weeks + 1):
        start = local(FIRST_MONDAY + timedelta(weeks=week - 1)).astimezone(UTC)
        frame, wall, stats = run_retrasyn(week_records(points, week), pd.Timestamp(start))
        name = f"retrasyn_week{week:02d}.csv.gz"
        frame.to_csv(OUT / name, index=False)
        rows.append({"week": week, "wall_s": wall, "file": name, "points": len(frame),
                     "trajectories": int(frame["traj_id"].nunique()), **stats})
        print(json.dumps(rows[-1]), flush=True)
    result = {"params": RETRASYN, "slot_minutes": SLOT.total_seconds() / 60, "taxis": taxis, "rows": rows,
              "commit": commit(REF), "machine": machine()}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "retrasyn.json").write_text(json.dumps(result, indent=1, default=str))
    return result


def read_release(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path)
    return frame.assign(t=pd.to_datetime(frame["t"], utc=True, format="ISO8601"))


def score() -> dict:
    """Every kept output (published weeks of each unit, RetraSyn's weeks) scored against its week's raw records by
    :func:`audits.trajectory_utility.trajectory_metrics` (the seed of its circle queries: the week); the figures are kept in
    :data:`SCORES` by output file (a running year rewrites its own JSON after every week) and added to the rows."""
    from audits.trajectory_utility import trajectory_metrics

    scores = json.loads(SCORES.read_text()) if SCORES.exists() else {}
    raw: dict[int, pd.DataFrame] = {}
    results = {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json")) if p != SCORES}
    for name, result in results.items():
        for row in result["rows"]:
            if row.get("file") and row["file"] not in scores:
                week = row["week"]
                if week not in raw:
                    raw[week] = week_records(weeks.sample(result["taxis"]), week)
                scores[row["file"]] = trajectory_metrics(raw[week], read_release(OUT / row["file"]), BBOX, week, GRID)
                SCORES.write_text(json.dumps(scores, indent=1))
                print(f"scored {name} week {week}", flush=True)
            if row.get("file"):
                row["metrics"] = scores[row["file"]]
    return results


def mismatches(result: dict) -> list[str]:
    """Weeks whose outcome differs from the caps' arithmetic."""
    return [f"week {r['week']}: expected {r['expected']}, got {r['outcome']}" for r in result["rows"]
            if r["expected"] != r["outcome"]]


METRICS = ("density", "trip", "pattern_f1", "transition", "query", "length", "start_hour_jsd", "duration_jsd",
           "outside_bbox_share")


def fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:.{digits}f}"


def secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} s"


def median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


STAGES = ("planned", "validated", "protected", "audited", "awaiting_approval", "approved", "published")


def stage_times(release_ids: list[int]) -> dict[str, float]:
    """The median seconds from each status of :data:`STAGES` to the next over the releases (their transitions)."""
    from tasks import db

    with db.engine().connect() as conn:
        steps = conn.execute(sa.text(
            "SELECT release_id, to_status, min(at) AS at FROM governance.release_transitions"
            " WHERE release_id = ANY(:ids) GROUP BY release_id, to_status"), {"ids": release_ids}).all()
    at = {(r.release_id, r.to_status): r.at for r in steps}
    return {f"{a} → {b}": median([(at[(i, b)] - at[(i, a)]).total_seconds() for i in release_ids
                                  if (i, a) in at and (i, b) in at]) for a, b in pairwise(STAGES)}


def render() -> None:
    """``bench/CONTINUAL_RESULTS.md`` between its markers, from the JSON files (scored first)."""
    results = score()
    units = [results[u] for u in UNITS if u in results]
    ref = results.get("retrasyn")
    commits = {}
    for u in units:
        for r in sorted(u["rows"], key=lambda r: r["week"]):
            commits.setdefault(r.get("commit", u["commit"])[:7], []).append(f"{u['unit']} {r['week']}")
    out = [(f"Run from the clone's root from {units[0]['machine']['date'][:10]}, at trajpub commits "
           + "; ".join(f"`{c}` ({weeks_of(w)})" for c, w in commits.items())
           + ": `python -m bench.continual year --unit UNIT --no-worker --until HH:MM`, then `... year --unit UNIT "
           "--no-worker --resume` (one `prefect worker start --pool trajpub` for both units, run side by side), "
           "`python -m bench.continual retrasyn`, `python -m bench.continual render`. Machine: "
           f"{units[0]['machine']['nproc']} cores ({units[0]['machine']['cpu']}), "
           f"{units[0]['machine']['ram_gb']} GB, shared with other benches and CI runs; niceness 10-15."), "",
           ("| unit of protection (cap) | weeks run | charged: expected / got | refused: expected / got | "
            "mismatches | published | blocked by the gate | wall of the weeks run | a charged week, commands' wall: "
            "week 1 / the last run / median | of which its flow, created to the steward: week 1 / last / median | "
            "a refused week (median) |"), "|---" * 11 + "|"]
    for u in units:
        rows = u["rows"]
        wrong = mismatches(u)
        count = {k: (sum(r["expected"] == k for r in rows), sum(r["outcome"] == k for r in rows))
                 for k in ("charged", "refused")}
        status = [r.get("status") for r in rows]
        ran = sorted((r for r in rows if r.get("release_id") and not r.get("taken_up")), key=lambda r: r["week"])
        refused = [r["week_s"] for r in rows if r["outcome"] == "refused"]
        later = [r for r in rows if r.get("out_of_order")]
        out.append(
            f"| {u['describe']} | {len(rows)} of {u['weeks_asked']}"
            + (f" (week {', '.join(str(r['week']) for r in later)} out of order)" if later else "")
            + f" | {count['charged'][0]} / {count['charged'][1]} | "
            f"{count['refused'][0]} / {count['refused'][1]} | {len(wrong) or 'none'} | {status.count('published')} | "
            f"{status.count('blocked')} | {u['year_s'] / 60:.0f} min | {ran[0]['week_s']:.0f} s / "
            f"{ran[-1]['week_s']:.0f} s (week {ran[-1]['week']}) / {median([r['week_s'] for r in ran]):.0f} s | "
            f"{secs(ran[0]['to_steward_s'])} / {secs(ran[-1]['to_steward_s'])} / "
            f"{secs(median([r['to_steward_s'] for r in ran]))} | {secs(median(refused))} |")
    published = [r["release_id"] for u in units for r in u["rows"] if r.get("status") == "published"]
    times = stage_times(published)
    out += ["", f"Where a published week's time goes (median over the {len(published)} published releases of both "
            "units, from `governance.release_transitions`): " + "; ".join(f"{k} {secs(v)}" for k, v in times.items())
            + ". The rest of a week is the commands' own start (Python imports under the machine's load), the bill's "
            "pricing, the worker picking the run up and the flow process starting."]
    out += ["", ("Each week's outcome, by unit (C charged and published, B charged and blocked by the gate, R refused "
            "at the bill with nothing started; `.` not run):"), ""]
    for u in units:
        marks = {"published": "C", "blocked": "B"}
        got = {r["week"]: marks.get(r.get("status"), "?") if r["outcome"] == "charged" else "R" for r in u["rows"]}
        line = "".join(got.get(week, ".") for week in range(1, u["weeks_asked"] + 1))
        exp = "".join("C" if e == "charged" else "R" for e in u["expected"])
        out += [f"- {u['unit']}: got      `{line}`",
                f"  {' ' * len(u['unit'])}  expected `{exp}` (charged or refused)"]
    out += ["", ("Utility per week (`audits.trajectory_utility.trajectory_metrics` against the week's raw records, 32 x 32 grid; "
            "JSDs and query error lower is better, pattern F1 higher is better). Medians over the weeks scored:"), "",
            "| system (unit) | weeks scored | " + " | ".join(METRICS) + " |", "|---" * (len(METRICS) + 2) + "|"]
    systems = [(f"trajpub ObjTrace ε 5 per taxi-week ({u['unit']})", u) for u in units]
    if ref:
        systems.append((f"RetraSyn ε {ref['params']['epsilon']:g}, w {ref['params']['w']} ({RETRASYN_UNIT})", ref))
    for label, res in systems:
        scored = [r["metrics"] for r in res["rows"] if r.get("metrics")]
        out.append(f"| {label} | {len(scored)} | " + " | ".join(fmt(median([m[k] for m in scored])) for k in METRICS)
                   + " |")
    out += ["", "Per week (density / trip / pattern F1; `-` not published or not run):", "",
            "| week | " + " | ".join(label.split(" (")[0] + f" ({res.get('unit', 'RetraSyn')})" for label, res in systems)
            + " |", "|---" * (len(systems) + 1) + "|"]
    by_week = [{r["week"]: r for r in res["rows"]} for _, res in systems]
    for week in range(1, 53):
        cells = []
        for rows in by_week:
            m = rows.get(week, {}).get("metrics")
            cells.append(" / ".join(fmt(m[k]) for k in ("density", "trip", "pattern_f1")) if m else "-")
        out.append(f"| {week} | " + " | ".join(cells) + " |")
    for u in units:
        out += ["", (f"Before the year, {u['unit']}: `trajpub budget show --forecast release/{u['deployment']} "
                "--periods 12`:"), "", "```", u["forecast"].strip(), "```", "",
                (f"and the whole year as one backfill (`trajpub backfill ... --start {FIRST_MONDAY} --every 7d`, "
                f"answered no): exit {u['bill']['rc']}"), "", "```",
                "\n".join((u["bill"]["stdout"] + u["bill"]["stderr"]).strip().splitlines()[-8:]), "```"]
    if ref:
        walls = [r["wall_s"] for r in ref["rows"]]
        out += ["", (f"RetraSyn at commit `{ref['commit'][:7]}`: {len(ref['rows'])} weeks, its synthesis "
                f"{median(walls):.1f} s per week (median; Python start and file reading included), "
                f"{ref['rows'][0]['empty_slots']} of {SLOTS} 12-minute slots of a week without reports.")]
    text = RESULTS_MD.read_text() if RESULTS_MD.exists() else f"{BEGIN}\n{END}\n"
    head, _, rest = text.partition(BEGIN)
    RESULTS_MD.write_text(head + BEGIN + "\n" + "\n".join(out) + "\n" + END + rest.partition(END)[2])
    wrong = [f"{u['unit']} {m}" for u in units for m in mismatches(u)]
    if wrong:
        raise SystemExit("outcomes differ from the caps' arithmetic: " + "; ".join(wrong))


def weeks_of(labels: list[str]) -> str:
    """``["w-event 1", "w-event 2", "w-event 5"]`` as ``"w-event weeks 1-2, 5"``: the weeks a commit ran, per unit."""
    by_unit: dict[str, list[int]] = {}
    for label in labels:
        unit, week = label.rsplit(" ", 1)
        by_unit.setdefault(unit, []).append(int(week))
    spans = []
    for unit, weeks_run in by_unit.items():
        runs: list[list[int]] = []
        for w in sorted(weeks_run):
            if runs and w == runs[-1][-1] + 1:
                runs[-1].append(w)
            else:
                runs.append([w])
        spans.append(f"{unit} weeks " + ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs))
    return "; ".join(spans)


def commit(repo: Path) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def worker() -> subprocess.Popen:
    """A process worker of the ``trajpub`` pool (created if missing), as ``prefect.yaml`` says to run one."""
    prefect("work-pool", "create", "trajpub", "--type", "process", "--overwrite")
    return subprocess.Popen([str(PROJECT / ".venv" / "bin" / "prefect"), "worker", "start", "--pool", "trajpub"],
                            cwd=PROJECT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("year", help="Run the weekly deployment over the year under one unit.")
    run.add_argument("--unit", choices=sorted(UNITS), required=True)
    run.add_argument("--weeks", type=int, default=52)
    run.add_argument("--taxis", type=int, default=weeks.TAXIS)
    run.add_argument("--no-worker", action="store_true", help="A worker already polls the trajpub pool.")
    run.add_argument("--until", help="HH:MM UTC: start no week after this time (the weeks run are reported).")
    run.add_argument("--resume", action="store_true", help="Go on with the unit's year from its results file.")
    one = sub.add_parser("week", help="Run one more week of a year already run, out of order.")
    one.add_argument("--unit", choices=sorted(UNITS), required=True)
    one.add_argument("--week", type=int, required=True)
    ref = sub.add_parser("retrasyn", help="Run RetraSyn on every week of the year.")
    ref.add_argument("--weeks", type=int, default=52)
    ref.add_argument("--taxis", type=int, default=weeks.TAXIS)
    sub.add_parser("score", help="Score the kept outputs not scored yet (also while a year runs).")
    sub.add_parser("render", help="Score the kept outputs and write bench/CONTINUAL_RESULTS.md.")
    args = parser.parse_args(argv)
    from trajpub.config import apply_environment

    apply_environment()
    if args.command == "year":
        until = None
        if args.until:
            hh, mm = (int(x) for x in args.until.split(":"))
            until = datetime.now(UTC).replace(hour=hh, minute=mm, second=0, microsecond=0)
        proc = None if args.no_worker else worker()
        try:
            if args.resume:
                resume(UNITS[args.unit], until)
            else:
                year(UNITS[args.unit], args.weeks, args.taxis, until)
        finally:
            if proc is not None:
                stop(proc)
    elif args.command == "week":
        one_week(UNITS[args.unit], args.week)
    elif args.command == "retrasyn":
        retrasyn(args.weeks, args.taxis)
    elif args.command == "score":
        score()
    else:
        render()


if __name__ == "__main__":
    main(sys.argv[1:])
