"""Bad input and a database that does not answer are one sentence on stderr with exit
code 1, never a traceback; YAML specs are read with a size and an alias limit; budget caps are finite; review
reports are private."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trajpub.errors import ParameterError
from trajpub.spec import ReleaseSpec, read_spec_file

TRAJPUB = str(Path(sys.executable).with_name("trajpub"))
NOBODY_LISTENS = "postgresql+psycopg://postgres@127.0.0.1:1/trajpub"  # port 1: connection refused at once


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([TRAJPUB, *args], capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, **env})


def assert_one_sentence(out: subprocess.CompletedProcess, says: str) -> None:
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr + out.stdout


@pytest.mark.parametrize("args", [["release", "list"], ["load", "tdrive", "/dev/null", "--dataset", "d"],
                                  ["budget", "show"]])
def test_the_database_down_is_one_sentence(args):
    # no retries: the sentence is the same after the default 15 s of them (test_db_retries.py counts them)
    assert_one_sentence(run_cli(*args, TRAJPUB_DATABASE_URL=NOBODY_LISTENS, TRAJPUB_DB_RETRIES="0"),
                        "the database does not answer")


def test_a_release_run_with_the_database_down_is_one_sentence(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("dataset: d\nbbox: [115.4, 39.4, 117.6, 41.1]\n")
    out = run_cli("release", "run", "--spec", str(spec), TRAJPUB_DATABASE_URL=NOBODY_LISTENS, TRAJPUB_DB_RETRIES="0")
    assert_one_sentence(out, "the database does not answer")


def test_a_malformed_param_is_one_sentence():
    out = run_cli("release", "run", "--dataset", "d", "--param", "epsilon=[1, 2")
    assert_one_sentence(out, "the value of parameter 'epsilon' is not a YAML value")


@pytest.mark.parametrize("value", ["inf", "nan", "0", "1e308", "1000.5"])
def test_a_budget_cap_must_be_finite_positive_and_bounded(value):
    assert_one_sentence(run_cli("budget", "cap", "d", value, "--steward", "ada"),
                        "the cap must be a positive finite number of at most 1000")


@pytest.mark.parametrize("value", ["-0.1", "0.999999", "0.02"])
def test_a_delta_cap_is_bounded(value):
    assert_one_sentence(run_cli("budget", "cap", "d", "1", "--delta", value, "--steward", "ada"),
                        "the δ cap is an ε-DP cap in [0, 0.01]")


@pytest.mark.parametrize(("yaml_text", "says"), [
    ("prepare: {cell_size_m: abc}", "cell_size_m must be a finite number, got 'abc' (prepare.cell_size_m)"),
    ("validation: {max_quarantine_share: lots}", "max_quarantine_share must be a finite number"),
    ("time_precision_s: .inf", "time_precision_s must be a positive number of seconds, got inf"),
    ("prepare: {split_by_day: maybe}", "split_by_day must be true or false"),
    ("prepare: 500", "'prepare' must be a mapping of its settings (prepare)"),
    ("validation: [0.1]", "'validation' must be a mapping of its settings (validation)"),
    ("window_start: 20080202", "'20080202' is not an ISO date or time (window_start)"),
    ("window_end: [2008, 2, 9]", "is not an ISO date or time (window_end)"),
])
def test_spec_values_of_the_wrong_type_are_refused_by_name(tmp_path, yaml_text, says):
    path = tmp_path / "spec.yaml"
    path.write_text(f"dataset: d\nbbox: [115.4, 39.4, 117.6, 41.1]\n{yaml_text}\n")
    with pytest.raises(ParameterError) as err:
        ReleaseSpec.from_dict(read_spec_file(path))
    assert says in str(err.value)


def test_a_yaml_alias_bomb_is_refused_fast_without_its_expansion(tmp_path):
    """Nine levels of nine aliases: 9^9 (387 million) leaves if expanded."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\ndataset: d\n")
    began = time.perf_counter()
    with pytest.raises(ParameterError, match="more than 100000 values once its aliases are expanded") as err:
        read_spec_file(path)
    assert time.perf_counter() - began < 5  # stopped while composing (the bomb took 16 s, 517 MB)
    assert len(str(err.value)) < 200


@pytest.mark.parametrize(("yaml_text", "where"), [
    ("dataset: d\nbbox: [115.4, 39.4, 117.6, 41.1]\ndataset: other\n", "line 3, column 1"),
    ("dataset: d\nbbox: [115.4, 39.4, 117.6, 41.1]\nprepare:\n  cell_size_m: 500\n  cell_size_m: 4000\n",
     "line 5, column 3"),
    ("dataset: d\nbbox: [115.4, 39.4, 117.6, 41.1]\nparams: {epsilon: 1, epsilon: 100}\n", "line 3, column 22"),
])
def test_a_key_written_twice_is_refused_with_its_line(tmp_path, yaml_text, where):
    """PyYAML keeps the last of two equal keys: a second ``dataset:`` further down would silently win."""
    path = tmp_path / "spec.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ParameterError, match="appears twice in one mapping") as err:
        read_spec_file(path)
    assert err.value.where == f"file {path}, {where}"


def test_a_merge_key_is_refused_with_its_line(tmp_path):
    """``<<: *other`` would bring in a second ``dataset`` past the duplicate-key check."""
    path = tmp_path / "spec.yaml"
    path.write_text("other: &o {dataset: secret}\ndataset: d\n<<: *o\nbbox: [115.4, 39.4, 117.6, 41.1]\n")
    with pytest.raises(ParameterError, match="a merge key") as err:
        read_spec_file(path)
    assert err.value.where == f"file {path}, line 3, column 1"


def test_a_spec_nested_thousands_deep_is_one_sentence(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("dataset: d\nparams: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ParameterError, match="nested too deeply"):
        read_spec_file(path)


def test_an_oversized_spec_is_refused(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("dataset: d\n#" + "x" * 1_000_001 + "\n")
    with pytest.raises(ParameterError, match="larger than 1000000 bytes"):
        read_spec_file(path)


def test_review_reports_are_0600_in_a_0700_folder(tmp_path, monkeypatch):
    from tasks import report

    monkeypatch.setattr(report, "REPORT_DIR", tmp_path / "reports")
    old = tmp_path / "reports"
    old.mkdir(mode=0o755)  # a folder from before the rule is tightened
    path = report.report_path(1)
    path.write_text("old")
    path.chmod(0o644)
    report.write_private(path, "<html></html>")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text() == "<html></html>"
    assert stat.S_IMODE(old.stat().st_mode) == 0o700


def test_a_report_out_of_the_report_folder_follows_no_link_and_makes_no_folder(tmp_path):
    from tasks import report
    from trajpub.errors import TrajpubError

    target = tmp_path / "elsewhere.txt"
    link = tmp_path / "link.html"
    link.symlink_to(target)
    with pytest.raises(TrajpubError, match="a symbolic link"):
        report.write_private(link, "<html></html>")
    assert not target.exists()
    with pytest.raises(TrajpubError, match="does not exist"):
        report.write_private(tmp_path / "no" / "such" / "folder" / "r.html", "<html></html>")
    assert not (tmp_path / "no").exists()
    assert report.write_private(tmp_path / "r.html", "<p>ok</p>").read_text() == "<p>ok</p>"
