"""The steward's review report: one self-contained HTML page per release (plots inlined as PNG data URIs).

It says, for the data steward (docs/design.md, "Architecture"): the guarantee in plain words, ε spent and left, each
attack's success against its baseline and threshold with intervals, the utility table, and plots: density maps
raw vs release, trajectory length and diameter distributions, attack bars. The page is stored in
``governance.review_reports``, copied to ``<state dir>/reports/release-<id>.html`` (0600 in a 0700 folder), and
published as the Prefect markdown artifact ``review-report-r<id>``, which the review artifact and the approval
form link.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import sqlalchemy as sa
from matplotlib.figure import Figure

from tasks.review import Review, read_review
from trajpub.candidate import CandidateRelease, Shape
from trajpub.config import STATE_DIR
from trajpub.errors import TrajpubError
from trajpub.guarantee import empirical_bound_words

REPORT_DIR = STATE_DIR / "reports"


def report_path(release_id: int) -> Path:
    return REPORT_DIR / f"release-{int(release_id)}.html"


def write_private(path: Path, page: str) -> Path:
    """Write a review page readable by its owner only (0600) in a folder only the owner can open (0700): the
    page holds statistics of the raw data. Only the report folder is made when missing; elsewhere (``report
    --out``) the folder must exist, and a symbolic link is refused, never followed."""
    if path.parent == REPORT_DIR:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.parent.chmod(0o700)  # a folder made before this rule
    elif not path.parent.is_dir():
        raise TrajpubError("the folder to write the report in does not exist (none is made)", f"file {path}")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise TrajpubError(f"the report cannot be written there ({'a symbolic link' if path.is_symlink() else exc.strerror}"
                           "); choose another file", f"file {path}") from None
    os.fchmod(fd, 0o600)  # an existing file keeps its mode through O_CREAT
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(page)
    return path


def figure(rows: int, cols: int, figsize: tuple[float, float], **subplots) -> tuple[Figure, object]:
    """A figure and its axes, without pyplot (whose import costs every release process half a second, and whose
    figure registry :func:`png` would have to empty): ``Figure.subplots`` takes pyplot's arguments."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(rows, cols, **subplots)


def png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def map_extent(*frames: pd.DataFrame) -> tuple[float, float, float, float]:
    lon = np.concatenate([f["lon"].to_numpy(float) for f in frames if len(f)])
    lat = np.concatenate([f["lat"].to_numpy(float) for f in frames if len(f)])
    lon, lat = lon[np.isfinite(lon)], lat[np.isfinite(lat)]
    lo_x, hi_x = np.quantile(lon, [0.005, 0.995])
    lo_y, hi_y = np.quantile(lat, [0.005, 0.995])
    return float(lo_x), float(hi_x), float(lo_y), float(hi_y)


def density_plot(raw: pd.DataFrame, release: pd.DataFrame, weights: np.ndarray | None = None) -> str:
    """Raw and released point density on the same 80x80 lon/lat bins (central 99% of the raw extent)."""
    extent = map_extent(raw)
    fig, axes = figure(1, 2, (10, 4.4), sharex=True, sharey=True)
    for ax, frame, w, title in ((axes[0], raw, None, "raw"), (axes[1], release, weights, "release")):
        density_panel(ax, frame, extent, f"{title} density (log scale)", w)
    axes[0].set_ylabel("latitude")
    return png(fig)


def density_panel(ax, frame: pd.DataFrame, extent: tuple[float, float, float, float], title: str,
                  weights: np.ndarray | None = None) -> None:
    """One density map: the share of points per lon/lat bin of 80x80 over ``extent``, on a log scale."""
    x0, x1, y0, y1 = extent
    h, _, _ = np.histogram2d(frame["lon"], frame["lat"], bins=80, range=[[x0, x1], [y0, y1]], weights=weights)
    total = h.sum()
    ax.imshow(np.log10(1 + (h / total if total else h).T * 1e4), origin="lower", extent=(x0, x1, y0, y1),
              aspect="auto", cmap="magma")
    ax.set_title(title)
    ax.set_xlabel("longitude")


def _per_trajectory(frame: pd.DataFrame) -> pd.DataFrame:
    """Points and diameter (km, bounding-box diagonal in the local metric frame) of each trajectory."""
    keys = ["object_id", "traj_id"] if "object_id" in frame and frame["object_id"].notna().all() else ["traj_id"]
    if "x" in frame and "y" in frame and frame["x"].notna().all():
        xs, ys = frame["x"], frame["y"]
    else:  # equirectangular approximation around the data: enough for a distribution plot
        lat0 = np.deg2rad(float(frame["lat"].mean()))
        xs, ys = frame["lon"] * 111_320 * np.cos(lat0), frame["lat"] * 110_540
    g = pd.DataFrame({"x": xs.to_numpy(), "y": ys.to_numpy()}).groupby(
        [frame[k].to_numpy() for k in keys], sort=False)
    ext = g.max() - g.min()
    return pd.DataFrame({"points": g.size().to_numpy(),
                         "diameter_km": np.hypot(ext["x"], ext["y"]).to_numpy() / 1000})


def distribution_plot(raw: pd.DataFrame, release: pd.DataFrame) -> str:
    """Trajectory length (points) and diameter distributions, raw vs release, as densities."""
    r, s = _per_trajectory(raw), _per_trajectory(release)
    fig, axes = figure(1, 2, (10, 3.6))
    for ax, col, label in ((axes[0], "points", "points per trajectory"), (axes[1], "diameter_km", "diameter (km)")):
        hi = float(np.quantile(np.concatenate([r[col], s[col]]), 0.99)) or 1.0
        bins = np.linspace(0, hi, 31)
        ax.hist(r[col].clip(upper=hi), bins=bins, density=True, alpha=0.55, label=f"raw ({len(r)})")
        ax.hist(s[col].clip(upper=hi), bins=bins, density=True, alpha=0.55, label=f"release ({len(s)})")
        ax.set_xlabel(label)
        ax.legend()
    axes[0].set_ylabel("density")
    return png(fig)


def _label(result: dict) -> str:
    """An audit row's name: the attack, and the adversary's cell size when it ran on a grid of its own."""
    return result["attack"] + (f" @ {result['resolution_m']:g} m" if result.get("resolution_m") else "")


def attack_plot(results: list[dict]) -> str:
    """Each attack's risk with its interval against its threshold (the gate decides on the interval), coloured by
    its verdict: blue passes, orange too close to call, red blocked; grey or red full bars for an attack that did
    not measure the release (passes or blocks)."""
    colours = {"passes": "#1f77b4", "too close to call": "#ff7f0e", "blocked": "#d62728", None: "#7f7f7f"}
    fig, ax = figure(1, 1, (10, 0.6 + 0.55 * max(1, len(results))))
    for i, a in enumerate(results):
        risk = a.get("risk")
        if risk is None:  # failed or not applicable: a full bar, red when it blocks
            ax.barh(i, 1.0, color="#7f7f7f" if a.get("passed") else "#d62728", alpha=0.35)
            continue
        ax.barh(i, risk, color=colours.get(a.get("verdict"), "#7f7f7f"), alpha=0.8)
        if a.get("risk_ci_low") is not None:
            below, above = max(risk - a["risk_ci_low"], 0.0), max(a["risk_ci_high"] - risk, 0.0)  # never negative
            ax.errorbar(risk, i, xerr=[[below], [above]], color="k", capsize=3)
        if a.get("threshold") is not None:
            ax.plot([a["threshold"]], [i], "|", color="#d62728", markersize=16, markeredgewidth=2)
    ax.set_yticks(range(len(results)), [_label(a) for a in results])
    ax.set_xlim(0, 1)
    ax.set_xlabel("baseline-corrected risk (bar, 95% CI); red tick = the policy's threshold")
    ax.invert_yaxis()
    return png(fig)


def html_table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(v, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec) if isinstance(v, float) else str(v)


DECIDE_ON_WORDS = {
    "upper_bound": ("Each verdict is read off the risk's 95% confidence interval: passes (the whole interval at or "
                    "under the threshold), blocked (the whole interval above it) or too close to call (it crosses "
                    "the threshold); the policy decides on the upper bound, so too close to call blocks."),
    "point": ("Each verdict is read off the risk's 95% confidence interval: passes (the whole interval at or under "
              "the threshold), blocked (the whole interval above it) or too close to call (it crosses the "
              "threshold); the policy decides on the point estimate, so too close to call passes when the "
              "estimate is under the threshold: another draw of the release may not."),
    None: "No attack was decided: the release ended before its audit, and its gate never ran.",
}
"""The review's sentence on how the verdicts were reached, by the policy's ``decide_on``."""


def risk_interval(a: dict) -> str:
    """An audit row's risk interval, ``[low, high]``, or ``-`` for an attack that did not measure."""
    return "-" if a.get("risk_ci_low") is None else f"[{a['risk_ci_low']:.3f}, {a['risk_ci_high']:.3f}]"


def attack_verdict(a: dict) -> str:
    """An audit row's verdict as the steward reads it: the three-way verdict on its risk interval (``passes``,
    ``too close to call``, ``BLOCKED``), with what the gate made of an interval too close to call (it blocks
    unless the policy decides on the point estimate); ``not gated`` without a threshold; for an attack that did
    not measure, pass or BLOCK by the policy's rule."""
    if a.get("error") is not None or a.get("risk") is None:
        return "pass" if a.get("passed") else "BLOCK"
    return {"passes": "passes", "blocked": "BLOCKED", None: "not gated",
            "too close to call": "too close to call: " + ("pass (point estimate)" if a.get("passed") else "BLOCK")
            }[a.get("verdict")]


def linking_words(review: Review) -> str | None:
    """A sentence when any attack the gate passed has its risk's interval above 0: the release links measurably,
    under the threshold (None when none does). Against controls, members more than people it never saw."""
    rows = review.measurable_links
    if not rows:
        return None
    controlled = any("controls" in (a.get("evidence") or {}) for a in rows)
    who = ("links its members measurably more than people it never saw" if controlled else
           "links records to their owners measurably better than a guess")
    where = {a["attack"]: f" at {a['resolution_m']:g} m" if a.get("resolution_m") else "" for a in rows}
    found = "; ".join(f"{a['attack']}{where[a['attack']]}: risk {a['risk']:.3f} {risk_interval(a)}, threshold "
                      f"{_fmt(a.get('threshold'))}" for a in rows)
    return f"This release {who}, under the threshold ({found})."


def verdicts(decision: dict) -> list[str]:
    """The gate's two verdicts, privacy (attacks) and utility (the policy's floor), as the steward reads them."""
    words = {"passed": "pass", "blocked": "BLOCK", "not gated": "not gated"}
    return [words.get(decision.get(side, ""), "-") for side in ("privacy", "utility")]


def utility_table(utility: dict, per_utility: dict) -> list[list]:
    """One row per utility figure: value, the policy's limit for the release's kind (``max`` or ``min``) and the
    gate's verdict on it; a figure the policy requires but that was not computed is listed as missing."""
    rows = []
    for name in [*utility, *(n for n in per_utility if n not in utility)]:
        v = utility.get(name)
        gate = per_utility.get(name, {})
        limit = (f"max {gate['max']:g}" if "max" in gate else f"min {gate['min']:g}" if "min" in gate else "-")
        status = {"passed": "pass", "blocked": "BLOCK", "missing": "BLOCK (missing)"}.get(gate.get("status"), "-")
        rows.append([name, _fmt(v, ".4g") if isinstance(v, float) else "missing" if v is None else v, limit, status])
    return rows


RESOLUTIONS_M = (250, 500, 1000, 2000)
USE_AT_JSD, USE_AT_HOT = 0.10, 8
"""A release is called useful at a cell size when its point density is within JSD 0.10 of the raw's there and at
least 8 of the raw's 10 busiest cells keep their share within x1.5 (the city-resolution bar at 500 m)."""


def cell_figures(raw: pd.DataFrame, release: pd.DataFrame, box: tuple[float, float, float, float],
                 size_m: float) -> dict:
    """The point density of ``raw`` and ``release`` (``lon, lat``) on square cells of ``size_m`` over ``box``
    (lon/lat, projected about its centre; points outside it left out): the JSD (natural log), how many of the
    raw's 10 busiest cells hold a released share within x1.5 of the raw's (``hot``), and the released share in
    cells where the raw has no point (``empty``), shares of the points inside the box."""
    from audits.utility import jsd
    from trajpub.grid import GridSpec

    grid = GridSpec(box, float(size_m))

    def counts(frame: pd.DataFrame) -> np.ndarray:
        lon, lat = frame["lon"].to_numpy(float), frame["lat"].to_numpy(float)
        inside = (lon >= box[0]) & (lon <= box[2]) & (lat >= box[1]) & (lat <= box[3])
        cell = grid.cell_of(*grid.project(lon[inside], lat[inside]))
        return np.bincount(cell[cell >= 0], minlength=grid.n_cells).astype(float)

    r, q = counts(raw), counts(release)
    out = {"jsd": jsd(r, q)}
    r, q = r / max(r.sum(), 1.0), q / max(q.sum(), 1.0)
    top = np.argsort(-r, kind="stable")[:10]
    ratio = q[top] / np.where(r[top] > 0, r[top], 1.0)
    out["hot"] = int(((ratio >= 1 / 1.5) & (ratio <= 1.5) & (r[top] > 0)).sum())
    out["empty"] = float(q[r == 0].sum())
    return out


def resolution_section(raw: pd.DataFrame, release_points: pd.DataFrame | None) -> list[str]:
    """The review's "Utility by resolution" heading, table and sentence (nothing without released points)."""
    if release_points is None or not len(release_points):
        return []
    rows, sentence = resolution_rows(raw, release_points)
    if not rows:
        return []
    return ["<h3>Utility by resolution (square cells over the raw points' box)</h3>",
            html_table(["cells", "density JSD", "raw's 10 busiest cells within x1.5",
                        "released share where the raw has none"], rows),
            f"<p><b>{html.escape(sentence)}</b></p>"]


def resolution_rows(raw: pd.DataFrame, release: pd.DataFrame) -> tuple[list[list], str]:
    """The review's utility by resolution: one row per cell size of :data:`RESOLUTIONS_M` over the raw points'
    box (:func:`cell_figures`), and the sentence saying from which size on the release is useful
    (:data:`USE_AT_JSD`, :data:`USE_AT_HOT`); no rows when the raw points span no box."""
    lon, lat = raw["lon"].to_numpy(float), raw["lat"].to_numpy(float)
    if len(lon) == 0 or not (lon.min() < lon.max() and lat.min() < lat.max()):
        return [], ""
    box = (float(lon.min()), float(lat.min()), float(lon.max()), float(lat.max()))
    rows, useful = [], []
    for size in RESOLUTIONS_M:
        f = cell_figures(raw, release, box, size)
        rows.append([f"{size:g} m", f"{f['jsd']:.3f}", f"{f['hot']} of 10", f"{100 * f['empty']:.1f}%"])
        if f["jsd"] <= USE_AT_JSD and f["hot"] >= USE_AT_HOT:
            useful.append(size)
    bar = (f"its point density within JSD {USE_AT_JSD:g} of the raw's and at least {USE_AT_HOT} of the raw's 10 "
           "busiest cells keeping their share within x1.5")
    sentence = (f"Use at >= {useful[0]:g} m: the finest of these cell sizes with {bar}." if useful else
                f"Use at cells coarser than {RESOLUTIONS_M[-1]:g} m only: none of these sizes has {bar}.")
    return rows, sentence


def mechanism_rows(metadata: dict) -> list[list]:
    """The mechanism's run figures, data-dependent and empirical epsilons first (Pufferfish: a measured ε above
    the charged one is the steward's to weigh), then the rest; parameters are in the guarantee."""
    rows = [[f"{key}: {e.get('kind', key)}", ", ".join(f"{part} {_fmt(e.get(f'epsilon_{part}'), '.4g')}"
                                                      for part in ("x", "y", "total"))]
            for key in ("analytic_epsilon", "empirical_epsilon") if isinstance(e := metadata.get(key), dict)]
    rows += [[k, json.dumps(v, default=str)[:300]] for k, v in metadata.items()
             if k not in ("params", "analytic_epsilon", "empirical_epsilon")]
    return rows


def _map_words(guarantee: dict) -> str:
    """The guarantee's privacy map in words (:class:`trajpub.guarantee.PrivacyMap`)."""
    m = guarantee.get("privacy_map") or {}
    k = m.get("records_per_object")
    return {"per_object": f"{m.get('account')}, per object as stated",
            "group_privacy": f"{m.get('account')}, group privacy over "
                             + (f"at most {k} records per object" if k else "an unbounded number of records"),
            "not_dp": "not DP (heuristic)"}.get(m.get("rule"), "-")


def controls_words(summary: dict) -> str | None:
    """What the steward reads about the control objects of a release without owners (:mod:`audits.controls`):
    the protocol, how many objects were held out (a raw count: governance and the review only, never lineage),
    what the attack table's figures then mean, and what the ledger says about the controls. None without
    controls."""
    c = summary.get("controls")
    if not c:
        return None
    total = c["n_members"] + c["n_controls"]
    return (f"Members against controls (protocol '{c['protocol']}', Anonymeter's): {c['n_controls']} of the "
            f"{total} objects ({c['share']:.0%}, the policy's share) were drawn at random, by object, and held out "
            f"of the mechanism's input; the release was made from the other {c['n_members']}. Every attack on it "
            "scores the members against these controls: success is the members' rate, baseline the controls', "
            "risk (members - controls) / (1 - controls). The mechanism never read the controls' data, so this "
            "release spent none of their privacy; the ledger still charges the dataset's unit, a bound that holds "
            "for every object. The audit reads the controls as it reads every raw object.")


#: The utility figures that measure a synthetic release's spatial signal (where, between which places, which routes):
#: what noise drowns when a per-object release has too few objects (:func:`support_words`).
SIGNAL_FIGURES = ("density_jsd", "circle_query_re", "trip_error", "pattern_f1", "pattern_f1_city")


def support_words(review: Review) -> str | None:
    """Why the utility floor blocked a release made under ε-DP per object, in words, when it blocked it on the
    figures of :data:`SIGNAL_FIGURES`: under that unit each object moves every released statistic by at most one
    unit whatever its data (the mechanism's sensitivity, e.g. ObjTrace's and CityTrace's normalised per-object
    histograms), so a statistic's signal is at most the number of objects while its noise has scale 1/ε of its
    share; a longer window adds no signal, more objects do (bench/UTILITY_RESULTS.md, "Where per-object DP has
    nothing to publish": per dataset). The number of objects the mechanism read is the controls' member count (a
    raw count: the review only). None otherwise."""
    g, per_utility = review.guarantee, review.gate.get("per_utility", {})
    failed = [name for name in SIGNAL_FIGURES if per_utility.get(name, {}).get("status") == "blocked"]
    if not failed or g.get("model") != "epsilon-DP" or g.get("privacy_unit") != "one object":
        return None
    c = review.summary.get("controls")
    read = f"the {c['n_members']} objects it was made from" if c else "the objects it was made from"
    return (f"What the blocked figures say ({', '.join(failed)}): this release protects each object (a person, a "
            f"vehicle) over all its data at epsilon {g.get('epsilon'):g}, so each of {read} moves every released "
            "statistic by at most one unit, whatever its data, while each statistic carries noise of scale 1/epsilon "
            "of its share. With so few objects for these figures, what was released is mostly that noise: under "
            "this unit the dataset cannot publish them usefully. A re-run would not change that and spends the "
            "budget again; a longer window adds no signal (each object still counts once); more objects (a larger "
            "fleet or population), coarser cells or a larger epsilon would, the last two weakening what the "
            "release answers or protects.")


def render(review: Review, raw: pd.DataFrame, release_points: pd.DataFrame | None,
           fragments: pd.DataFrame | None, every: int = 1) -> str:
    """The page of the review record, with plots of the audit's frames: ``raw`` points (every ``every``-th raw
    trajectory, said in the titles when it is a sample) and the candidate's ``release_points`` or
    ``fragments``."""
    rel, results, decision, budget = review.release, review.audits, review.gate, review.budget
    g = review.guarantee
    rid = review.release_id
    images = []
    sampled = f" (raw: one trajectory in {every})" if every > 1 else ""
    if release_points is not None and len(release_points):
        images.append(("Density: raw vs release" + sampled, density_plot(raw, release_points)))
        images.append(("Trajectory length and diameter" + sampled, distribution_plot(raw, release_points)))
    if fragments is not None and len(fragments):
        pts = fragments.explode(["lon", "lat"])
        images.append(("Density: raw points vs released fragments (weighted by estimated count)" + sampled,
                       density_plot(raw, pts, pts["estimated_count"].to_numpy(float))))
    images.append(("Attacks", attack_plot(results)))
    attack_rows = [[a["attack"], f"{a['resolution_m']:g} m" if a.get("resolution_m") else "-",
                    _fmt(a.get("success_rate")) if a.get("error") is None else f"{a['outcome']}: {a['error']}",
                    "-" if a.get("ci_low") is None else f"[{a['ci_low']:.3f}, {a['ci_high']:.3f}]",
                    _fmt(a.get("baseline"), ".4f"), _fmt(a.get("risk")), risk_interval(a), _fmt(a.get("threshold")),
                    attack_verdict(a)] for a in results]
    utility_rows = utility_table(review.utility, decision.get("per_utility", {}))
    eps = g.get("epsilon")
    verdict = ("BLOCKED by the audit gate: " + "; ".join(decision.get("reasons", []))
               if decision.get("blocked") else "The audit gate passed this release to the steward.")
    parts = [
        f"<h1>Release {rid}: {html.escape(rel['mechanism'])} on <code>{html.escape(rel['dataset'])}</code></h1>",
        (f"<p>Requested by <b>{html.escape(str(rel.get('requested_by')))}</b>; {html.escape(review.snapshot)}; "
         f"window {html.escape(review.window)}.</p>"),
        quarantine_section(review),
        f"<p class='verdict'>{html.escape(verdict)}</p>",
        html_table(["privacy verdict", "utility verdict"], [verdicts(decision)]),
        "<h2>Guarantee</h2>", f"<p>{html.escape(g.get('statement', '(none stated)'))}</p>",
        f"<p><b>{html.escape(bound)}</b></p>" if (bound := empirical_bound_words(g)) else "",
        html_table(["model", "privacy unit", "proven", "ε", "δ", "to the dataset's unit"],
               [[g.get("model"), g.get("privacy_unit"), g.get("proven"), eps, g.get("delta"), _map_words(g)]]),
        "<ul>" + "".join(f"<li>{html.escape(c)}</li>" for c in g.get("caveats", [])) + "</ul>",
        "<h2>Privacy budget (this release included)</h2>",
        f"<p><b>{html.escape(budget[0])}</b> {html.escape(budget[1])}</p>",
        "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in budget[2:]) + "</ul>",
        "<h2>Linkage attacks</h2>",
        (f"<p>Gated by policy <b>{html.escape(review.policy_label)}</b>. Grid-based attacks "
         "run at each cell size of the policy (the adversary picks the resolution); the gate takes the worst. "
         f"{html.escape(DECIDE_ON_WORDS[review.decide_on])}</p>"),
        f"<p>{html.escape(words)}</p>" if (words := controls_words(review.summary)) else "",
        f"<p><b>{html.escape(words)}</b></p>" if (words := linking_words(review)) else "",
        html_table(["attack", "cells", "success", "95% CI", "baseline", "risk", "risk 95% CI", "threshold",
                    "verdict"], attack_rows),
        ("<p>Cell sizes set aside (the gate decided on the attack's other cell sizes):</p><ul>"
         + "".join(f"<li>{html.escape(attack)} at {html.escape(size)} m: {html.escape(why)}</li>"
                   for attack, size, why in review.set_aside) + "</ul>") if review.set_aside else "",
        "<h2>Utility</h2>",
        html_table(["metric", "value", "limit", "verdict"], utility_rows) if utility_rows else "<p>(none)</p>",
        f"<p>{html.escape(words)}</p>" if (words := support_words(review)) else "",
        *resolution_section(raw, release_points),
        "<h2>Mechanism run (for the steward only: never in lineage or published)</h2>",
        html_table(["figure", "value"], mechanism_rows(review.mechanism_run)),
    ]
    parts += [f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' src='{src}'>" for title, src in images]
    parts.append("<h2>Attack evidence</h2>")
    parts += [f"<details><summary>{html.escape(_label(a))}</summary><pre>"
              f"{html.escape(json.dumps(a.get('evidence', {}), indent=1, default=str)[:20000])}</pre></details>"
              for a in results]
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px}"
             "img{max-width:100%}.verdict{font-weight:bold}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>trajpub release {rid} review</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")


def page_body(page: str) -> str:
    """The page's body: what the Prefect UI shows as a markdown artifact (it renders the HTML in markdown, the
    tables and the inlined PNG plots included), so that the review form links to a page the UI can open
    (a ``file://`` link cannot be opened from an http page)."""
    return page.split("<body>", 1)[1].rsplit("</body>", 1)[0]


def quarantine_section(review) -> str:
    """Why raw points were quarantined (:attr:`tasks.review.Review.quarantine_reasons`), as HTML; empty when none
    was."""
    lines = review.quarantine_words()
    if not lines:
        return ""
    v = review.validation
    return (f"<p>Validation quarantined {v['n_quarantined']:,} of {v['n_rows']:,} raw points (a point may fail "
            "several expectations):</p><ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>")


def artifact_words(release_id: int, page: str | None) -> str:
    """Whether the Prefect UI's review-report artifact of the release (its latest version under the key) still
    shows ``page``, the report the auditor attested (sql/036): anyone with the Prefect API string can add a version
    under the same key, so the UI's copy is checked against the database's."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    if page is None:
        return "none (not audited)"
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(
            any_=[f"review-report-r{release_id}"])), sort=ArtifactSort.CREATED_DESC, limit=1)
    if not found:
        return "not in the Prefect UI"
    if found[0].data == page_body(page):
        return "the Prefect UI's copy matches the attested report"
    return ("REPLACED: the Prefect UI's copy differs from the attested report; read it with `trajpub report "
            f"{release_id}` or in the console")


def store(conn: sa.Connection, release_id: int, page: str) -> Path:
    """Keep the page with the release and write its copy; returns the copy's path."""
    conn.execute(sa.text("INSERT INTO governance.review_reports (release_id, html) VALUES (:r, :h)"),
                 {"r": release_id, "h": page})
    return write_private(report_path(release_id), page)


def write_review(conn: sa.Connection, release_id: int, raw: pd.DataFrame, result: CandidateRelease,
                 every: int = 1) -> Path:
    """Render the review page of a release from its review record (the audit and the gate's decision stored)
    and the audit's frames (``raw``: every ``every``-th raw trajectory: :func:`tasks.audit.review_sample`);
    store it."""
    page = render(read_review(conn, release_id), raw, None if result.shape is Shape.FRAGMENTS else result.points,
                  result.fragments, every)
    return store(conn, release_id, page)
