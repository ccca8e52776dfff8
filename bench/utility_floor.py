"""The gate's utility floor against the releases it is meant to block or pass.

Each release of :data:`RELEASES` is made as :mod:`bench.table4` makes it (the first ``--taxis`` taxis of the T-Drive
sample cleaned and prepared as the flow prepares them, :func:`bench.table4.partitions`, on ``--cell-m`` cells over
the Beijing bbox, the adapter's per-object record cap, two Dask workers), measured with the review's figures
(:func:`tasks.audit.measure_utility`, what the gate reads) and judged by the utility part of
:func:`audits.gate.evaluate_gate` under the default policy (``audits/policies/default.yaml``). No attack runs here:
the verdict is the floor's alone.

    .venv/bin/python -m bench.utility_floor                        # 300 taxis, 2 km cells, seed 0
    .venv/bin/python -m bench.utility_floor --taxis 40 --cell-m 4000 --seeds 7,1,2 --only adatrace,objtrace

prints one markdown table per release kind: the figures the policy limits, then the verdict and its reasons.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import pandas as pd
from distributed import Client

from audits.gate import GatePolicy, evaluate_gate
from bench.references import objtrace_models
from bench.table4 import MODELS, Model, partitions, protect
from bench.tdrive import BBOX, load_clean
from mechanisms.registry import mechanism
from tasks.audit import attack_frames, measure_utility
from tasks.dask_cluster import local_cluster
from trajpub.grid import GridSpec

RELEASES = [
    Model("prefix tree eps=1 h=8 (the former demo)", "prefix_tree",
          {"epsilon": 1.0, "height": 8, "max_records_per_object": 7}),
    *[m for m in MODELS if m.mechanism in ("dpt", "adatrace", "fgs_pufferfish", "w4m", "glove", "klt", "mixzone")],
    *objtrace_models(),
    Model("CityTrace eps=5 per taxi", "citytrace", {"epsilon": 5.0}),
    Model("AdaTrace eps=10 (the integration tests' release)", "adatrace", {"epsilon": 10.0, "max_records_per_object": 7}),
    Model("ObjTrace eps=10 per object (the consumer-guide test's)", "objtrace", {"epsilon": 10.0}),
]


def judge(client: Client, clean: pd.DataFrame, model: Model, n_taxis: int, seed: int,
          policy: GatePolicy) -> dict:
    """One release of ``model``: its kind, the figures the policy limits for that kind, the floor's verdict."""
    params = model.parsed()
    parts = partitions(clean, n_taxis, mechanism(model.mechanism).max_records_per_object(params), model.grid)
    candidate, _, kind = protect(client, model, params, parts, seed)
    raw = pd.concat(parts, ignore_index=True)
    _, release = attack_frames(raw, candidate)
    utility = measure_utility(raw, candidate, release, seed, BBOX)
    decision = evaluate_gate(policy, [], kind, utility)
    blocked = [name for name, e in decision.per_utility.items() if e["status"] in ("blocked", "missing")]
    return {"label": model.label, "seed": seed, "kind": kind,
            "figures": {name: utility.get(name) for name in policy.utility.get(kind, {})},
            "verdict": decision.utility + (f" ({', '.join(blocked)})" if blocked else "")}


def markdown(rows: list[dict], policy: GatePolicy) -> str:
    lines = []
    for kind in dict.fromkeys(r["kind"] for r in rows):
        limits = policy.utility.get(kind, {})
        lines += [f"{kind}:", "", "| release | seed | " + " | ".join(limits) + " | floor |",
                  "|---|---|" + "---|" * (len(limits) + 1)]
        for r in (r for r in rows if r["kind"] == kind):
            cells = ["n/a" if r["figures"][n] is None else f"{r['figures'][n]:.3f}" for n in limits]
            lines.append(f"| {r['label']} | {r['seed']} | " + " | ".join(cells) + f" | {r['verdict']} |")
        lines.append("| limit | | " + " | ".join(f"{lim.bound} {lim.value:g}" for lim in limits.values()) + " | |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--taxis", type=int, default=300)
    parser.add_argument("--cell-m", type=float, default=2000.0)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--only", default="", help="comma-separated mechanism names (default: all)")
    args = parser.parse_args(argv)
    only = {x for x in args.only.split(",") if x}
    policy = GatePolicy.default()
    clean, _ = load_clean()
    rows = []
    with local_cluster(2, memory_limit="6GB") as cluster, Client(cluster) as client:
        for model in RELEASES:
            if only and model.mechanism not in only:
                continue
            model = replace(model, grid=GridSpec(BBOX, args.cell_m))
            for seed in (int(s) for s in args.seeds.split(",")):
                rows.append(judge(client, clean, model, args.taxis, seed, policy))
                print(f"{rows[-1]['label']} seed {seed}: {rows[-1]['verdict']}", flush=True)
    print(markdown(rows, policy))


if __name__ == "__main__":
    main()
