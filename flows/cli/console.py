"""``trajpub console``: the steward console, a web application beside the Prefect UI (:mod:`console`)."""

from __future__ import annotations

from console import server as console_server
from flows.cli.base import main
from flows.cli.services import up_and_down


@main.group()
def console() -> None:
    """The steward console on loopback (port 4300: TRAJPUB_CONSOLE_PORT; TLS: TRAJPUB_CONSOLE_TLS_CERT and
    TRAJPUB_CONSOLE_TLS_KEY): stewards sign in with their own database login to review, approve, reject and
    withdraw releases and read the budget."""


up_and_down(console, console_server.console_up, console_server.console_down)
