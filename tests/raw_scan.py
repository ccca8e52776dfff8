"""The raw-statistic scan: no exact statistic of the raw data (a count, a bbox coordinate, an
empirical epsilon measured on it) among the numbers a consumer can read. Used on whole releases
(``tests/integration/conftest.py``) and on every mechanism's run metadata and guarantee
(``tests/unit/test_mechanism_contract.py``)."""

from __future__ import annotations

import re

#: keys whose values are not statistics of the raw data: identifiers and timestamps; an attack's cell size (the
#: gate policy's, e.g. 250 m); the mechanism's parameters (the spec's public inputs); an audited empirical bound
#: (a bench figure of a simulated scenario); and the size of the published product itself, which a consumer counts
#: in the published table anyway (a truthful release that keeps every record publishes the raw record count by
#: construction; a DP release's size is noisy)
PUBLIC_KEYS = {"release_id", "runId", "eventTime", "event_time", "approved_at", "published_at", "content_hash",
               "version", "code_version", "window_start", "window_end", "decided_at", "resolution_m", "params",
               "empirical_bound", "rows", "released_records"}


def numbers(value, release_id: int | None, key: str = "") -> list[float]:
    """Every number a consumer reads in ``value`` (JSON leaves, and numbers written in its texts); the values of
    :data:`PUBLIC_KEYS` and the release's own id where a text names it ("release 36", "release_id = 36")
    excepted."""
    if key in PUBLIC_KEYS:
        return []
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in numbers(v, release_id, k)]
    if isinstance(value, list):
        return [n for v in value for n in numbers(v, release_id, key)]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int | float):
        return [float(value)]
    # numbers standing alone in a text (not the digits of a name such as pub_1a2b__r36 or a hash)
    text = str(value)
    if release_id is not None:
        text = re.sub(rf"release(?:_id)?(?: =)? {int(release_id)}(?!\d)", "release", text)
    return [float(m) for m in re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w])", text)]


def assert_none_readable(forbidden: dict[str, float], readable: dict[str, object],
                         release_id: int | None = None) -> None:
    """Fail naming the statistic and the place when a value of ``forbidden`` is among the numbers of a value of
    ``readable`` (to a relative 1e-9)."""
    for where, value in readable.items():
        found = numbers(value, release_id)
        for name, v in forbidden.items():
            if v == 0:  # e.g. the raw bbox of a logger's (0, 0) fixes: zero is in every record, it tells nothing
                continue
            hits = [n for n in found if abs(n - v) <= 1e-9 * max(1.0, abs(v))]
            assert not hits, f"{name} = {v} is readable in {where}"
