"""What a mechanism releases: a :class:`CandidateRelease` of one :class:`Shape`.

The shape is the one signal audit, staging, the output check, publication and the review dispatch on. Each shape
declares its columns here, once, and :meth:`CandidateRelease.check` holds a candidate to them:

- ``synthetic``: points of records that belong to nobody (prefix tree, DPT, AdaTrace, ObjTrace); no owner.
- ``truthful``: each record is one object's own, perturbed or cut (FGS-Pufferfish, mix zones); the points carry
  the owner's ``object_id`` for the auditor.
- ``anonymity_sets``: records published in sets (``set_id``) of at least k: either every member is real and
  carries its ``object_id`` (W4M's (k,δ)-groups) or the sets hold dummies and the private owner table names the
  real member ((k-Ψ)-anonymity, DTPP dummies).
- ``generalised``: GLOVE/KLT samples, a lon/lat rectangle and a time span (``t`` .. ``t_end``) per point,
  identical within a group (``set_id``); ``lon``, ``lat`` are the rectangle's centre.
- ``fragments``: an aggregate product, cell sequences with estimated counts (FASTPub); no points.

The owner table (``traj_id, object_id, source_traj_id``, one row per released record, stored privately and never
published) says whose a released record is when the points do not, and which raw trajectory a renumbered record
comes from (the audit's point error pairs them through it); for fragments, which clients answered.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pandas as pd

from trajpub.errors import TrajpubError

#: The columns every released point has (``t`` is NaT where a mechanism releases no time).
POINT_COLUMNS = ("traj_id", "seq", "cell", "t", "lon", "lat")
#: The extra columns of a generalised sample: its lon/lat rectangle and the end of its time span.
GENERALISED_COLUMNS = ("lon_min", "lat_min", "lon_max", "lat_max", "t_end")
#: Columns a candidate carries for the auditor only (the owner of a truthful record, metric coordinates); staging
#: and publication never read them.
AUDITOR_ONLY = ("object_id", "x", "y")
FRAGMENT_COLUMNS = ("fragment_id", "cells", "estimated_count", "round", "lon", "lat")
OWNER_COLUMNS = ("traj_id", "object_id", "source_traj_id")


@dataclass(frozen=True)
class Behaviour:
    """What one shape does at each step of a release, declared once (:data:`BEHAVIOUR`).

    ``published``: the columns a consumer reads (a candidate's, checked by :meth:`CandidateRelease.check`);
    ``owned``: every record carries its owner's ``object_id`` for the auditor; ``audit_kind``: the attacks' view
    of the release (:data:`audits.registry.RELEASE_KINDS`); ``staging``: the staging table and the columns staged
    (tasks/publish.py converts each column of the frame); ``export_select``/``export_order``: the export's reader
    of the product's main layer (tasks/export.py; a ``trajectories`` product adds its LineStrings). The published
    table itself is made by the database's publisher from the staged columns (sql/026), which no caller can
    hand SQL to."""

    product: str
    audit_kind: str
    published: tuple[str, ...]
    owned: bool
    staging: tuple[str, tuple[str, ...]]
    export_select: str
    export_order: str

    @property
    def has_sets(self) -> bool:
        return "set_id" in self.published


class Shape(enum.Enum):
    """The shape of a release; its behaviour (:class:`Behaviour`) is :data:`BEHAVIOUR`'s row."""

    SYNTHETIC = "synthetic"
    TRUTHFUL = "truthful"
    ANONYMITY_SETS = "anonymity_sets"
    GENERALISED = "generalised"
    FRAGMENTS = "fragments"

    @property
    def behaviour(self) -> Behaviour:
        return BEHAVIOUR[self]

    @property
    def product(self) -> str:
        """The published product: "trajectories" (points and their LineStrings) or "fragments"."""
        return self.behaviour.product

    @property
    def audit_kind(self) -> str:
        """The attacks' view of the release: synthetic records link to nobody, every record of the other point
        shapes is someone's, fragments are aggregate."""
        return self.behaviour.audit_kind

    @property
    def has_sets(self) -> bool:
        return self.behaviour.has_sets

    @property
    def published(self) -> tuple[str, ...]:
        return self.behaviour.published

    @property
    def required(self) -> tuple[str, ...]:
        """The columns a candidate must have (published, and the owner's for the auditor)."""
        return self.published + (("object_id",) if self.behaviour.owned else ())


_POINTS_STAGED = ("traj_id", "seq", "cell", "t", "geom")
_POINTS_EXPORTED = "traj_id, seq, t, geom"
BEHAVIOUR = {
    Shape.SYNTHETIC: Behaviour("trajectories", "synthetic", POINT_COLUMNS, False,
                               ("candidate_points", _POINTS_STAGED), _POINTS_EXPORTED, "traj_id, seq"),
    Shape.TRUTHFUL: Behaviour("trajectories", "truthful", POINT_COLUMNS, True,
                              ("candidate_points", _POINTS_STAGED), _POINTS_EXPORTED, "traj_id, seq"),
    Shape.ANONYMITY_SETS: Behaviour("trajectories", "truthful", POINT_COLUMNS + ("set_id",), False,
                                    ("candidate_points", _POINTS_STAGED + ("set_id",)),
                                    "set_id, " + _POINTS_EXPORTED, "traj_id, seq"),
    # the region is what was published; geom is only its centre
    Shape.GENERALISED: Behaviour("trajectories", "truthful", POINT_COLUMNS + ("set_id",) + GENERALISED_COLUMNS, True,
                                 ("candidate_points", _POINTS_STAGED + ("set_id", "t_end", "region")),
                                 "set_id, traj_id, seq, t, t_end, region AS geom", "traj_id, seq"),
    Shape.FRAGMENTS: Behaviour("fragments", "aggregate", FRAGMENT_COLUMNS, False,
                               ("candidate_fragments", ("fragment_id", "cells", "estimated_count", "round", "geom")),
                               "fragment_id, cells::text AS cells, length, estimated_count, round, geom",
                               "fragment_id"),
}


@dataclass(frozen=True)
class CandidateRelease:
    """A candidate release of ``shape`` and the mechanism's run metadata (JSON-safe, no seed). ``points``: one
    row per released point (empty for fragments); ``fragments``: one row per released fragment (``cells`` the
    cell sequence, ``lon``/``lat`` the cell centres); ``owners``: the private owner table."""

    shape: Shape
    points: pd.DataFrame
    metadata: dict
    fragments: pd.DataFrame | None = None
    owners: pd.DataFrame | None = None

    @property
    def released_nothing(self) -> bool:
        """No point or no fragment: nothing to audit or publish (FASTPub admitting no fragment at its k, say)."""
        released = self.fragments if self.shape is Shape.FRAGMENTS else self.points
        return released is None or len(released) == 0

    def check(self) -> CandidateRelease:
        """Raise :class:`TrajpubError` (a mechanism's bug, not the user's) unless the candidate has its shape's
        columns, only those plus :data:`AUDITOR_ONLY`, and a record of every owned shape can be traced to its
        owner; returns the candidate."""
        where = f"candidate release ({self.shape.value})"
        if self.owners is not None:
            _require(self.owners, OWNER_COLUMNS, where + " owners")
        if self.shape is Shape.FRAGMENTS:
            if self.fragments is None or len(self.points):
                raise TrajpubError("a fragment release has a fragment table and no points", where)
            _require(self.fragments, FRAGMENT_COLUMNS, where)
            return self
        if self.fragments is not None:
            raise TrajpubError("a point release has no fragment table", where)
        if self.released_nothing:
            return self
        _require(self.points, self.shape.required, where)
        extra = sorted(set(self.points) - set(self.shape.published) - set(AUDITOR_ONLY))
        if extra:
            raise TrajpubError(f"column(s) {', '.join(extra)} are not part of the shape", where)
        if self.shape is Shape.SYNTHETIC and ("object_id" in self.points or self.owners is not None):
            raise TrajpubError("a synthetic record belongs to nobody: no object_id, no owner table", where)
        if self.shape is Shape.ANONYMITY_SETS and "object_id" not in self.points and self.owners is None:
            raise TrajpubError("anonymity sets name their real members: object_id on the points or an owner "
                               "table", where)
        return self


def _require(frame: pd.DataFrame, columns: tuple[str, ...], where: str) -> None:
    missing = [c for c in columns if c not in frame]
    if missing:
        raise TrajpubError(f"missing column(s) {', '.join(missing)}", where)
