"""Malformed input to every command, as an outside probe tries it (specs with wrongly typed fields, bad YAML,
impossible dates, bad numbers, missing files, bad options): one sentence and a non-zero exit, never a traceback.
The command line runs in this process (click's runner, the real ``main`` group on the real services) so that the
~100 kinds take seconds; a Prefect API on a closed port stands in for any spec that would pass (flows/prefect_api.py
then answers), so no release starts."""

from __future__ import annotations

import json
import os
import socket

import pytest
import yaml
from click.testing import CliRunner

pytestmark = pytest.mark.integration

BASE = {"bbox": [116.0, 39.6, 116.8, 40.2], "requested_by": "ada", "mechanism": "adatrace",
        "params": {"epsilon": 1.0, "max_records_per_object": 1}}
DROP = object()

#: A spec with one field changed (DROP: left out), by what is wrong with it.
SPECS = {
    "bbox a word": {"bbox": "everywhere"}, "bbox of 3": {"bbox": [1, 2, 3]}, "bbox nested": {"bbox": [[1, 2], [3, 4]]},
    "bbox NaN": {"bbox": [float("nan"), 1, 2, 3]}, "bbox inverted": {"bbox": [117, 40, 116, 39]},
    "params a list": {"params": [1, 2]}, "params a word": {"params": "eps"}, "params empty": {"params": None},
    "epsilon a word": {"params": {"epsilon": "lots"}}, "epsilon negative": {"params": {"epsilon": -1}},
    "epsilon infinite": {"params": {"epsilon": float("inf")}}, "epsilon a boolean": {"params": {"epsilon": True}},
    "epsilon 1e308": {"params": {"epsilon": 1e308}},
    "records a fraction": {"params": {"epsilon": 1, "max_records_per_object": 1.5}},
    "records a word": {"params": {"epsilon": 1, "max_records_per_object": "x"}},
    "unknown parameter": {"params": {"epsilon": 1, "colour": "red"}},
    "dataset a number": {"dataset": 5}, "dataset a list": {"dataset": ["a"]}, "no dataset": {"dataset": DROP},
    "no bbox": {"bbox": DROP}, "mechanism a number": {"mechanism": 3}, "unknown mechanism": {"mechanism": "nope"},
    "requester a number": {"requested_by": 7}, "window_start a word": {"window_start": "yesterday-ish"},
    "window_start a number": {"window_start": 12}, "window_start month 13": {"window_start": "2008-13-01"},
    "both windows": {"window_start": "2008-02-01", "window": {"last": "7d"}},
    "window unit unknown": {"window": {"last": "7 parsecs"}}, "window a list": {"window": [1]},
    "window align unknown": {"window": {"last": "7d", "align": "fortnight"}},
    "prepare a word": {"prepare": "x"}, "cell negative": {"prepare": {"cell_size_m": -5}},
    "cell a word": {"prepare": {"cell_size_m": "big"}}, "validation a word": {"validation": "x"},
    "share above 1": {"validation": {"max_quarantine_share": 2}},
    "share a word": {"validation": {"max_quarantine_share": "x"}}, "timeout a word": {"approval_timeout_s": "soon"},
    "timeout negative": {"approval_timeout_s": -1}, "queue infinite": {"queue_timeout_s": float("inf")},
    "seed outside test mode": {"seed": 10**30}, "unknown key": {"colour": "red"},
    "precision a word": {"time_precision_s": "x"}, "precision 0": {"time_precision_s": 0},
    "gate thresholds": {"gate_policy": {"decide_on": "point"}}, "dask scheduler named": {"dask_address": "tcp://x:1"},
}
#: Spec files whose text is wrong, by what is wrong with it.
TEXTS = {
    "unclosed list": "dataset: [unclosed\n", "tabs": "dataset:\t x\n\tbbox: 1\n", "a list": "- 1\n- 2\n",
    "a number": "42\n", "empty": "", "5,000 deep": "a: " + "[" * 5000 + "]" * 5000 + "\n",
    "merge key": "x: &a {dataset: d}\n<<: *a\ndataset: other\n", "duplicate key": "dataset: a\ndataset: b\n",
    "NUL bytes": "\x00\x01\x02", "not UTF-8": None, "alias bomb": "a: &a [1,1,1,1,1,1,1,1,1]\n" + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdef", "bcdefg", strict=True)),
    "python tag": "dataset: !!python/object/apply:os.system ['true']\n", "31 February": "window_start: 2008-02-31\n",
}


def cases(dataset: str, files) -> list[tuple[str, list[str]]]:
    """Every malformed invocation: (what is wrong, the command's arguments)."""
    run = [(f"spec: {k}", ["release", "run", "--spec", files(k, yaml.safe_dump(spec(dataset, v)))])
           for k, v in SPECS.items()]
    run += [(f"YAML: {k}", ["release", "run", "--spec", files(k, t)]) for k, t in TEXTS.items()]
    run += [(f"compare YAML: {k}", ["release", "compare", "--spec", files(k, TEXTS[k])])
            for k in ("unclosed list", "5,000 deep", "a list", "duplicate key", "NUL bytes")]
    csv, missing = files("points", "a,b\n1,2\n"), "/nonexistent/spec.yaml"
    return run + [
        ("spec missing", ["release", "run", "--spec", missing]), ("spec a folder", ["release", "run", "--spec", "/tmp"]),
        ("release id a word", ["release", "show", "abc"]), ("release id huge", ["release", "show", "9" * 23]),
        ("approve id huge", ["approve", "9" * 20, "--steward", "ada"]),
        ("reject without comment", ["reject", "1", "--steward", "ada"]),
        ("steward without password", ["reject", "1", "--steward", "nobody_here", "--comment", "x"]),
        ("retention huge", ["retention", dataset, "99999999999999", "--steward", "ada"]),
        ("retention a word", ["retention", dataset, "x", "--steward", "ada"]),
        ("retention bad dataset", ["retention", "Bad-Name", "1", "--steward", "ada"]),
        ("cap a word", ["budget", "cap", dataset, "lots", "--steward", "ada"]),
        ("cap NaN", ["budget", "cap", dataset, "nan", "--steward", "ada"]),
        ("cap 1e308", ["budget", "cap", dataset, "1e308", "--steward", "ada"]),
        ("budget bad dataset", ["budget", "show", "--dataset", "x;drop"]),
        ("budget periods 0", ["budget", "show", "--periods", "0"]),
        ("load unknown format", ["load", "nope", csv, "--dataset", "m_x"]),
        ("load missing file", ["load", "tdrive", missing, "--dataset", "m_x"]),
        ("load option without =", ["load", "csv", csv, "--dataset", "m_x", "--option", "nokey"]),
        ("load unknown option", ["load", "csv", csv, "--dataset", "m_x", "--option", "zzz=1"]),
        ("load YAML as T-Drive", ["load", "tdrive", files("5,000 deep", TEXTS["5,000 deep"]), "--dataset", "m_x"]),
        ("load bytes as gpkg", ["load", "gpkg", files("NUL bytes", TEXTS["NUL bytes"]), "--dataset", "m_x"]),
        ("load bytes as geojson", ["load", "geojson", files("NUL bytes", TEXTS["NUL bytes"]), "--dataset", "m_x"]),
        ("load empty GeoLife folder", ["load", "geolife", os.path.dirname(csv), "--dataset", "m_x"]),
        ("deploy time zone Mars", ["deploy", "--spec", files("ok", yaml.safe_dump(spec(dataset, {}))), "--name", "x",
                                   "--timezone", "Mars/Olympus"]),
        ("deploy cron in words", ["deploy", "--spec", files("ok", yaml.safe_dump(spec(dataset, {}))), "--name", "x",
                                  "--cron", "every day"]),
        ("backfill 31 February", ["backfill", "release/x", "--start", "2008-02-31", "--end", "2008-03-01"]),
        ("backfill step unknown", ["backfill", "release/x", "--start", "2008-02-01", "--end", "2008-03-01",
                                   "--every", "3 parsecs"]),
        ("roads from a CSV", ["roads", "load-osm", csv]),
        ("export id a word", ["export", "abc"]), ("report of no release", ["report", "9" * 11]),
        ("policy missing", ["policy", "set", dataset, missing, "--steward", "ada"]),
        ("policy bad YAML", ["policy", "set", dataset, files("unclosed list", TEXTS["unclosed list"]),
                             "--steward", "ada"]),
        ("policy 5,000 deep", ["policy", "set", dataset, files("5,000 deep", TEXTS["5,000 deep"]), "--steward", "ada"]),
        ("policy a list", ["policy", "set", dataset, files("a list", TEXTS["a list"]), "--steward", "ada"]),
        ("policy a spec", ["policy", "set", dataset, files("ok", yaml.safe_dump(spec(dataset, {}))), "--steward", "ada"]),
        ("four-eyes maybe", ["four-eyes", dataset, "maybe", "--steward", "ada"]),
        ("withdraw id a word", ["withdraw", "x", "--steward", "ada"]),
        ("steward SQL", ["steward", "add", "Robert'); DROP"]), ("requester 500 chars", ["requester", "add", "x" * 500]),
        ("dataset upper case", ["dataset", "show", "NoSuch"]), ("dataset path", ["dataset", "drop", "../x"]),
        ("anchor a folder", ["verify", "--anchor", "/tmp"]),
        ("anchor not JSON", ["verify", "--anchor", files("unclosed list", TEXTS["unclosed list"])]),
        ("publish id a word", ["publish-approved", "x"]), ("unknown command", ["publsh"]),
    ]


def spec(dataset: str, change: dict) -> dict:
    out = json.loads(json.dumps({"dataset": dataset, **BASE}))
    for key, value in change.items():
        out.pop(key) if value is DROP else out.__setitem__(key, value)
    return out


@pytest.fixture(scope="module")
def invocations(tmp_path_factory, loaded_tdrive_module):
    folder = tmp_path_factory.mktemp("malformed")

    def files(name: str, text: str | None) -> str:
        path = folder / (name.replace(" ", "_").replace(",", "") + ".yaml")
        if text is None:
            path.write_bytes(b"dataset: \xff\xfe\n")
        else:
            path.write_text(text)
        return str(path)

    return cases(loaded_tdrive_module, files)


@pytest.fixture(scope="module")
def loaded_tdrive_module(engine, owner, tdrive_subset, stewards):
    from tests.integration.conftest import load_tdrive_subset

    return load_tdrive_subset(tdrive_subset, "malformed", engine, owner, stewards["ada"])


@pytest.fixture(scope="module")
def closed_prefect_api():
    """Prefect's API on a loopback port nothing listens on, for this process (Prefect's temporary settings)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with temporary_settings(updates={PREFECT_API_URL: f"http://127.0.0.1:{port}/api"}):
        yield


def test_every_malformed_input_is_one_sentence(invocations, closed_prefect_api):
    from flows.cli import main

    runner, tracebacks, silent = CliRunner(), [], []
    for what, args in invocations:
        done = runner.invoke(main, args)
        if done.exception is not None and not isinstance(done.exception, SystemExit):
            tracebacks.append(f"{what}: {type(done.exception).__name__}: {done.exception}")
        elif done.exit_code == 0 or not done.output.strip().splitlines()[-1].lower().startswith("error"):
            silent.append(f"{what}: exit {done.exit_code}: {done.output.strip()[-300:]}")
    assert len(invocations) >= 100
    assert tracebacks == [] and silent == [], "\n".join(tracebacks + silent)
