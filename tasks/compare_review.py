"""The steward's one review of a comparison: a frontier plot (the worst attack risk against each utility
metric the gate floors, one point per candidate, the gate's limits drawn), a table, the density maps side by side
and the recommendation (:func:`trajpub.comparison.recommend`). Each candidate keeps its own full review report
(:mod:`tasks.report`), linked from the table. The page holds statistics of the raw data: governance only."""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd

from audits.gate import VERDICTS
from tasks import report
from trajpub.comparison import Recommendation, privacy_load, too_close, utility_load


def _number(o: dict) -> str:
    return f"#{o['release_id']}"


def frontier_plot(outcomes: list[dict]) -> str | None:
    """One panel per utility metric the gate limits for some candidate: x is the worst upper confidence bound of
    an attack risk as a share of its threshold (the default gate blocks right of 1), y the metric's value with its
    limit per release kind drawn; a point per audited candidate, green when the gate passed it, orange when it
    passed it on a point estimate too close to call, red when it blocked it."""
    audited = [o for o in outcomes if privacy_load(o["attacks"]) is not None]
    metrics = sorted({n for o in audited for n, e in o["gate"].get("per_utility", {}).items()
                      if "max" in e or "min" in e})
    if not audited or not metrics:
        return None
    cols = min(3, len(metrics))
    rows = math.ceil(len(metrics) / cols)
    fig, axes = report.figure(rows, cols, (4.6 * cols, 3.6 * rows), squeeze=False)
    for ax, metric in zip(axes.flat, metrics, strict=False):
        limits = set()
        for o in audited:
            entry = o["gate"].get("per_utility", {}).get(metric)
            if entry is None or entry.get("value") is None:
                continue
            x = privacy_load(o["attacks"])
            colour = ("#d62728" if o["gate"].get("blocked") else "#ff7f0e" if too_close(o["attacks"])
                      else "#2ca02c")
            ax.scatter([x], [entry["value"]], color=colour, zorder=3)
            ax.annotate(_number(o), (x, entry["value"]), textcoords="offset points", xytext=(4, 3), fontsize=8)
            if "max" in entry or "min" in entry:
                limits.add(("max", entry["max"]) if "max" in entry else ("min", entry["min"]))
        for bound, value in sorted(limits):
            ax.axhline(value, color="k", linestyle="--", linewidth=0.8)
            ax.annotate(f"{bound} {value:g}", (0, value), textcoords="offset points", xytext=(2, 2), fontsize=7)
        ax.axvline(1.0, color="k", linestyle=":", linewidth=0.8)
        ax.set_xlim(left=0)
        ax.set_xlabel("worst attack risk (upper 95% bound) / its threshold")
        ax.set_title(metric)
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    fig.tight_layout()
    return report.png(fig)


def density_maps(raw: pd.DataFrame, releases: list[tuple[str, pd.DataFrame, np.ndarray | None]]) -> str:
    """The raw snapshot's density and each candidate's released density side by side, on the same bins."""
    extent = report.map_extent(raw)
    panels = [("raw snapshot", raw, None), *releases]
    cols = min(4, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = report.figure(rows, cols, (3.4 * cols, 3.1 * rows), squeeze=False, sharex=True, sharey=True)
    for ax, (title, frame, weights) in zip(axes.flat, panels, strict=False):
        report.density_panel(ax, frame, extent, title, weights)
        ax.title.set_fontsize(8)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    return report.png(fig)


def attack_verdicts(attacks: list[dict]) -> str:
    """Each gated attack's three-way verdict with its risk and interval, at its worst resolution (the worst
    verdict, then the highest upper bound): ``name risk [low, high] verdict``."""
    worst: dict[str, dict] = {}
    for a in attacks:
        if a.get("verdict") is None:
            continue
        rank = (VERDICTS.index(a["verdict"]), a["risk_ci_high"])
        if a["attack"] not in worst or rank > (VERDICTS.index(worst[a["attack"]]["verdict"]),
                                               worst[a["attack"]]["risk_ci_high"]):
            worst[a["attack"]] = a
    return "; ".join(f"{name} {a['risk']:.3f} {report.risk_interval(a)} {a['verdict']}"
                     for name, a in sorted(worst.items())) or "-"


def table_rows(outcomes: list[dict]) -> list[list[str]]:
    """One row per candidate: release, candidate, status, ε charged, privacy and utility verdicts, each attack's
    verdict on its risk interval (:func:`attack_verdicts`), the worst upper bound's share of its threshold, the
    share of the utility floor used, and why it was blocked or failed."""
    rows = []
    for o in outcomes:
        gate = o["gate"]
        privacy, utility = report.verdicts(gate) if gate else ("-", "-")
        p = privacy_load(o["attacks"])
        eps = "not DP" if o["account"] == "heuristic" else "-" if o["epsilon"] is None else f"{o['epsilon']:g}"
        rows.append([_number(o), o["label"], o["status"], eps, privacy, utility, attack_verdicts(o["attacks"]),
                     "-" if p is None else f"{p:.0%}",
                     f"{utility_load(gate.get('per_utility', {})):.0%}" if gate else "-",
                     "; ".join(gate.get("reasons", [])) if gate else (o["failure"] or "")])
    return rows


HEADER = ["release", "candidate", "status", "ε charged", "privacy", "utility", "attacks: risk [95% CI] verdict",
          "worst upper bound / threshold", "utility floor used", "why blocked"]


def page(name: str, dataset: str, outcomes: list[dict], recommendation: Recommendation, bill_lines: list[str],
         frontier: str | None, densities: str | None) -> str:
    """The comparison's review page (HTML; its body is the Prefect artifact)."""
    rec = f"<p><b>Recommended:</b> {html.escape(recommendation.reason)}</p>"
    links = "".join(f"<li>{html.escape(_number(o))} {html.escape(o['label'])}: "
                    + (f"<a href='/artifacts/artifact/{o['report_artifact']}'>full review report</a>"
                       if o.get("report_artifact") else "no report (not audited)") + "</li>" for o in outcomes)
    parts = [(f"<h1>Comparison {html.escape(name)} on <code>{html.escape(dataset)}</code>: "
              f"{len(outcomes)} candidates</h1>"), rec,
             "<h2>Candidates</h2>", report.html_table(HEADER, table_rows(outcomes)),
             "<h2>Privacy budget (every candidate charged)</h2>",
             "<ul>" + "".join(f"<li>{html.escape(line.lstrip('- '))}</li>" for line in bill_lines) + "</ul>"]
    if frontier:
        parts.append(f"<h2>Frontier</h2><img alt='Frontier' src='{frontier}'>")
    if densities:
        parts.append(f"<h2>Density maps</h2><img alt='Density maps' src='{densities}'>")
    parts += ["<h2>Each candidate's review report</h2>", f"<ul>{links}</ul>"]
    style = ("body{font-family:sans-serif;max-width:1300px;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px}"
             "img{max-width:100%}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>trajpub comparison {html.escape(name)}"
            f"</title><style>{style}</style></head><body>{''.join(parts)}</body></html>")


def markdown(name: str, outcomes: list[dict], recommendation: Recommendation, artifact: str | None) -> str:
    """The pause form's description: the recommendation, the table, the link to the whole review and how to
    answer."""
    link = f"[open the comparison's review](/artifacts/artifact/{artifact})" if artifact else "(not in the UI)"
    lines = [f"# Comparison {name}: pick one candidate to publish", "",
             f"**Recommended**: {recommendation.reason}", "",
             f"**Review** (frontier, density maps, each candidate's report): {link}", "",
             "| " + " | ".join(HEADER) + " |", "|---" * len(HEADER) + "|"]
    lines += ["| " + " | ".join(str(c).replace("|", "/") for c in row) + " |" for row in table_rows(outcomes)]
    awaiting = [o for o in outcomes if o["status"] == "awaiting_approval"]
    lines += ["", ("Pick: type the release id of the candidate to publish, with the decision code from "
                   "`trajpub steward code RELEASE --steward LOGIN --decision pick` for that release (it records "
                   "your login and binds the pick); the "
                   "other candidates are rejected as not picked and their staging is discarded. Or: "
                   "`trajpub release pick RELEASE --steward LOGIN`."),
              "", "Candidates you can pick: " + (", ".join(f"{_number(o)} ({o['label']})" for o in awaiting)
                                                 or "none")]
    return "\n".join(lines)
