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
