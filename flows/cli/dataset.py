"""``trajpub load`` and ``trajpub dataset``: a source into PostGIS, a dataset dropped."""

from __future__ import annotations

from pathlib import Path

import click

from flows.cli.base import STEWARD_OPTION, main, pipeline_engine, steward_engine, table, valid_dataset
from tasks.db import transaction
from trajpub.errors import TrajpubError


class _LoadCommand(click.Command):
    """``trajpub load``: its help lists every format's options (read from the readers, when help is asked)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from trajpub.formats import options_help

        formatter.write_paragraph()
        formatter.write_text("Formats and their options (--option KEY=VALUE, repeatable):")
        formatter.write_paragraph()
        with formatter.indentation():
            for line in options_help(width=formatter.width - formatter.current_indent).splitlines():
                formatter.write(" " * formatter.current_indent + line + "\n")
        formatter.write_paragraph()
        formatter.write_text("An object whose points the file lists newest-first is put in time order (the load "
                             "says how many); points going back in time otherwise stay in file order, and a "
                             "release's validation quarantines them.")


@main.command(cls=_LoadCommand)
@click.argument("fmt", metavar="FORMAT")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--dataset", required=True, help="Dataset name (lower case, digits, underscores).",
              callback=valid_dataset)
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="A format option, e.g. object_id=taxi or timezone=Asia/Shanghai: see the list below.")
def load(fmt: str, path: Path, dataset: str, options: tuple[str, ...]) -> None:
    """Load raw points from PATH (a file, or a folder for tdrive and geolife) into the dataset named by
    --dataset (created when new): FORMAT is tdrive, geolife, csv, gpkg or geojson."""
    from tasks.load import load_source

    opts = {}
    for item in options:
        if "=" not in item:
            raise TrajpubError(f"option {item!r} must look like KEY=VALUE", "--option")
        key, value = item.split("=", 1)
        opts[key] = value
    report = load_source(pipeline_engine(), fmt, path, dataset, opts or None, progress=lambda m: click.echo(f"  {m}"))
    if report.already_loaded:
        click.echo(f"{path} is already loaded into '{dataset}' (source {report.source_id}); nothing changed")
        return
    click.echo(f"loaded {report.n_loaded} points into '{dataset}', quarantined {report.n_quarantined} "
               f"(of {report.n_read} read) in {report.seconds:.1f} s; quarantined rows are in staging.quarantine")


@main.group()
def dataset() -> None:
    """Loaded datasets."""


@dataset.command("drop")
@click.argument("name", callback=valid_dataset)
@STEWARD_OPTION
def dataset_drop(name: str, steward: str) -> None:
    """Delete dataset NAME's raw points, sources, quarantine and staging. Refused while a release of it is
    published (withdraw it first) or under way; its releases, budget ledger, approvals and lineage stay."""
    from tasks.datasets import drop_dataset

    dropped = drop_dataset(steward_engine(steward), name)
    click.echo(f"dropped '{name}': {dropped.n_points} points from {dropped.n_sources} source(s), its quarantine "
               f"and staging; its releases, ledger and lineage stay (recorded in governance.dataset_drops)")


@dataset.command("list")
def dataset_list() -> None:
    """Every loaded dataset: time range (UTC), objects, points, sources and unit of protection."""
    from tasks.datasets import summaries

    rows = [{"dataset": d.dataset, "from (UTC)": d.first and f"{d.first:%Y-%m-%d %H:%M}",
             "to (UTC)": d.last and f"{d.last:%Y-%m-%d %H:%M}", "time zone": d.timezone or "UTC",
             "objects": d.n_objects, "points": d.n_points, "sources": len(d.sources)}
            for d in transaction(summaries, "summarise the datasets", pipeline_engine())]
    click.echo(table(rows, ["dataset", "from (UTC)", "to (UTC)", "time zone", "objects", "points", "sources"]))


@dataset.command("show")
@click.argument("name", callback=valid_dataset)
def dataset_show(name: str) -> None:
    """What NAME holds: its time range in UTC and local time, objects, points, sources, unit of protection and
    the budget left in each account."""
    from tasks.datasets import summaries

    [summary] = transaction(lambda conn: summaries(conn, name), "summarise the dataset", pipeline_engine())
    click.echo("\n".join(summary.lines()))
