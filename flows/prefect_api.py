"""Whether an error means that the Prefect server's API does not answer, and where that API is: the command line
and the steward console then say so in one sentence (what to start) instead of a traceback.

Prefect's client reports an unreachable API in two ways: ``httpx.ConnectError``/``ConnectTimeout`` from a
request, and, when it first checks the server's version, ``RuntimeError("Failed to reach API at ...")``
(``prefect.client.orchestration.PrefectClient.raise_for_api_version_mismatch``), with the connection error as
its cause."""

from __future__ import annotations

#: What an operator runs to bring the local server back (flows/cli/services.py).
START = "`trajpub server up`"


def api_url() -> str:
    """The Prefect API this process talks to (``PREFECT_API_URL``, or the local server's)."""
    from prefect.settings import get_current_settings

    return str(get_current_settings().api.url or "(PREFECT_API_URL is not set)")


def unreachable(exc: BaseException) -> bool:
    """True when ``exc`` (or an error in its chain of causes) says the Prefect API could not be reached: a refused
    or timed-out connection to it, or Prefect's own "Failed to reach API"."""
    import httpx

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, RuntimeError) and str(exc).startswith("Failed to reach API"):
            return True
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout) and _to_prefect(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _to_prefect(exc: BaseException) -> bool:
    """Whether a connection error was a request to the Prefect API (not, say, an OpenLineage backend's)."""
    try:
        url = str(exc.request.url)
    except (AttributeError, RuntimeError):  # httpx raises RuntimeError when the error carries no request
        return True
    return url.startswith(api_url().rstrip("/"))


def sentence(then: str = "run the command again") -> str:
    """The one-sentence error: where the API is, what to start, and what to do next."""
    return (f"the Prefect server at {api_url()} is not reachable: start it with {START} (or point PREFECT_API_URL "
            f"at a running one), then {then}")
