"""``trajpub lineage``: delivering the stored OpenLineage events."""

from __future__ import annotations

import click

from flows.cli.base import main, pipeline_engine
from trajpub.errors import TrajpubError


@main.group()
def lineage() -> None:
    """OpenLineage events: stored in governance.lineage_events, sent to the configured transport."""


@lineage.command("deliver")
def lineage_deliver() -> None:
    """Send the stored events not yet delivered to the OpenLineage transport configured in the environment
    (OPENLINEAGE_URL, OPENLINEAGE_CONFIG or OPENLINEAGE__TRANSPORT__*), oldest first."""
    from tasks.lineage import configured_client, deliver

    if configured_client() is None:
        raise TrajpubError("no OpenLineage transport is configured: set OPENLINEAGE_URL (HTTP), OPENLINEAGE_CONFIG "
                           "(an openlineage.yml) or OPENLINEAGE__TRANSPORT__TYPE", "environment")
    click.echo(f"{deliver(pipeline_engine())} lineage events delivered")
