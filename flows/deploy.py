"""Deployments: serve the release flow with a cron schedule and default parameters.

The served deployment is what the Prefect UI's "Run" button (or ``run_deployment``) starts, with the default
spec or with parameters changed in the form; the schedule starts it with the defaults.
"""

from __future__ import annotations

from pathlib import Path

from prefect.schedules import Cron

from flows.release import parse_spec, release_flow
from trajpub.errors import ParameterError
from trajpub.spec import read_spec_file


def serve(spec_path: Path, name: str, cron: str, timezone: str) -> None:
    """Register ``release/<name>`` with the schedule and serve its runs (blocks until interrupted)."""
    spec = read_spec_file(spec_path)
    parse_spec(spec)  # a deployment with a broken default spec would fail at every scheduled run
    try:
        schedule = Cron(cron, timezone=timezone)
    except ValueError as exc:
        raise ParameterError(f"invalid schedule: {exc}", f"--cron {cron!r} --timezone {timezone!r}") from None
    release_flow.serve(name=name, schedules=[schedule], parameters={"spec": spec},
                       description=f"Governed release of {spec['dataset']} ({spec_path.name})",
                       tags=["trajpub", spec["dataset"]])
