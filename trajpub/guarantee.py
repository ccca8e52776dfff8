"""The privacy guarantee a mechanism really gives, in words a data steward can read verbatim."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Guarantee:
    """What a release protects, against whom, and with which caveats.

    model: the formal model ("epsilon-DP", "epsilon-LDP", "(k,delta)-anonymity", "heuristic", ...).
    privacy_unit: what one protected individual contributes ("one trajectory record", "one object").
    neighbouring: the neighbouring relation of the DP definition, if any ("add/remove one record").
    epsilon / delta: the budget this release spends (None for non-DP models).
    proven: whether the guarantee is a theorem (True) or a heuristic claim (False).
    statement: the guarantee in plain words.
    caveats: what the guarantee does not cover.
    """

    model: str
    privacy_unit: str
    statement: str
    proven: bool
    neighbouring: str | None = None
    epsilon: float | None = None
    delta: float = 0.0
    caveats: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["caveats"] = list(self.caveats)
        return d

    def plain_text(self) -> str:
        lines = [self.statement]
        lines += [f"Caveat: {c}" for c in self.caveats]
        return "\n".join(lines)


def object_level_caveat(epsilon: float, max_records_per_object: int | None) -> str:
    """The caveat of a mechanism that is epsilon-DP per trajectory record: an object with several records is
    protected at (records per object) x epsilon by group privacy (Dwork and Roth 2014, Thm 2.2)."""
    head = ("One object (a person, a vehicle) that contributes several trajectory records is protected only at "
            "(max records per object) x epsilon by group privacy")
    if max_records_per_object is None:
        return head + "; the number of records per object is not capped here, so the object-level guarantee is unbounded."
    return (head + f": with at most {max_records_per_object} records per object (a cap the pipeline enforces before "
            f"this mechanism), that is epsilon = {max_records_per_object * epsilon:g} per object.")
