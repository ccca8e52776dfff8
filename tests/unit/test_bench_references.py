"""bench.references' summary and verdict: mean ± sd over the runs that released something, and which side of the
bar ObjTrace is on per metric (pattern F1 higher is better, the others lower)."""

from bench.references import BAR_METRICS, summary, verdict


def run(label_or_tool: str, seed: int, density: float | None, f1: float | None, wall: float) -> dict:
    metrics = None if density is None else {m: 0.5 for m in BAR_METRICS} | {"density": density, "pattern_f1": f1}
    base = {"dataset": "tdrive", "seed": seed, "wall_s": wall, "records": 10}
    if label_or_tool == "privtrace":
        return base | {"tool": "privtrace", "epsilon": 5.0, "metrics": metrics}
    return base | {"tool": "trajpub objtrace", "label": label_or_tool, "metrics": metrics or dict.fromkeys(BAR_METRICS)}


def rows(results: list[dict]):
    return summary({"runs": results})


def test_verdict_compares_in_each_metrics_direction():
    ours = [run("ObjTrace eps=5 per object", s, 0.10 + 0.01 * s, 0.30, 2.0) for s in range(3)]
    ref = [run("privtrace", s, 0.20 + 0.01 * s, 0.40 + 0.01 * s, 200.0) for s in range(3)]
    lines = verdict(rows(ours + ref))
    by_metric = {line.split(" | ")[0].strip("| "): line for line in lines if line.startswith("| ")}
    # margin 0.1, both sd 0.01 over 3 runs: s.e. = sqrt(2 * 0.01**2 / 3) = 0.00816, 0.1 / s.e. = 12.2
    assert by_metric["density"].endswith("| +0.100 | 12.2 | yes |")
    assert by_metric["pattern_f1"].endswith("| **no** |")          # 0.30 < 0.41: F1 is higher-is-better
    assert "-0.110" in by_metric["pattern_f1"]
    assert by_metric["query"].endswith("| +0.000 | n/a | **no** |")  # a tie does not beat (s.e. 0: n/a)
    assert by_metric["runtime s (bar: <= 10 s)"].endswith("| yes |")


def test_empty_releases_are_counted_not_averaged():
    ours = [run("ObjTrace eps=1 per object", 0, 0.6, 0.1, 1.0), run("ObjTrace eps=1 per object", 1, None, None, 1.0)]
    row = rows(ours).iloc[0]
    assert row["runs"] == 2
    mean, _, n = row["density"]
    assert (mean, n) == (0.6, 1)
