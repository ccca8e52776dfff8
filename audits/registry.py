"""Every attack the gate can run, by its policy name, with the kinds of release it applies to.

The audit task picks the attacks a policy names for a product type with :func:`attacks_for` and builds each
with :func:`build_attack`. Release kinds:

- ``"truthful"``: released records still belong to raw objects; the release carries ``object_id`` (the
  auditor's private link to the owner), e.g. W4M, (k-Psi)-anonymity, FGS-Pufferfish, geo-indistinguishability;
- ``"synthetic"``: records with no owner (the noisy prefix tree, AdaTrace-style synthesizers); ``t`` may be
  NaT; every attack on them scores members against held-out controls (:mod:`audits.controls`);
- ``"aggregate"``: tables of counts (fragments or cells with ``count``), e.g. FASTPub.

Some names share one attack class and differ by a fixed parameter (``signature_linkage`` and
``signature_linkage_synthetic``: ``mode``; ``membership_dcr`` and ``membership_shadow``: ``calibration``; the
``reidentification_*`` family: ``kind``); the registry fixes it,
and a policy may not override it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from audits.ap_attack import NAME as AP_NAME
from audits.ap_attack import APAttack, APAttackParams
from audits.attack import Attack
from audits.closest_record import DCR_NAME, SHADOW_NAME, ClosestRecord, ClosestRecordParams
from audits.home_work import NAME as HOME_WORK_NAME
from audits.home_work import HomeWorkInference, HomeWorkParams
from audits.known_points import NAME as KNOWN_POINTS_NAME
from audits.known_points import KnownPoints, KnownPointsParams
from audits.membership import NAME as MEMBERSHIP_NAME
from audits.membership import MembershipInference, MembershipParams
from audits.reidentification import KINDS, NAME_PREFIX, Reidentification, ReidentificationParams
from audits.shape_match import NAME as SHAPE_NAME
from audits.shape_match import ShapeMatch, ShapeMatchParams
from audits.signature_linkage import SYNTHETIC_NAME, TRUTHFUL_NAME, SignatureLinkage, SignatureLinkageParams
from audits.time_match import NAME as TIME_NAME
from audits.time_match import TimeMatch, TimeMatchParams
from trajpub.errors import ParameterError
from trajpub.params import Scope

RELEASE_KINDS = ("truthful", "synthetic", "aggregate")


class RegisteredAttack(NamedTuple):
    """An attack class, its parameter class, the release kinds it applies to, and the parameters its name fixes."""

    attack: type[Attack]
    params: type
    release_kinds: frozenset[str]
    fixed: Mapping[str, Any] = MappingProxyType({})


_TRUTHFUL = frozenset({"truthful"})

ATTACKS: dict[str, RegisteredAttack] = {
    TRUTHFUL_NAME: RegisteredAttack(SignatureLinkage, SignatureLinkageParams, _TRUTHFUL,
                                    MappingProxyType({"mode": "truthful"})),
    SYNTHETIC_NAME: RegisteredAttack(SignatureLinkage, SignatureLinkageParams, frozenset({"synthetic"}),
                                     MappingProxyType({"mode": "synthetic"})),
    KNOWN_POINTS_NAME: RegisteredAttack(KnownPoints, KnownPointsParams, _TRUTHFUL),
    AP_NAME: RegisteredAttack(APAttack, APAttackParams, _TRUTHFUL),
    HOME_WORK_NAME: RegisteredAttack(HomeWorkInference, HomeWorkParams, _TRUTHFUL),
    **{NAME_PREFIX + kind: RegisteredAttack(Reidentification, ReidentificationParams, _TRUTHFUL,
                                            MappingProxyType({"kind": kind})) for kind in KINDS},
    MEMBERSHIP_NAME: RegisteredAttack(MembershipInference, MembershipParams, frozenset({"aggregate"})),
    DCR_NAME: RegisteredAttack(ClosestRecord, ClosestRecordParams, frozenset({"synthetic"}),
                               MappingProxyType({"calibration": "none"})),
    SHADOW_NAME: RegisteredAttack(ClosestRecord, ClosestRecordParams, frozenset({"synthetic"}),
                                  MappingProxyType({"calibration": "reference"})),
    TIME_NAME: RegisteredAttack(TimeMatch, TimeMatchParams, frozenset({"synthetic"})),
    SHAPE_NAME: RegisteredAttack(ShapeMatch, ShapeMatchParams, frozenset({"synthetic"})),
}
"""Policy name -> :class:`RegisteredAttack`: an attack is registered by one line here (docs/extending.md)."""

GRID_ATTACKS = frozenset({TRUTHFUL_NAME, SYNTHETIC_NAME, AP_NAME, *(NAME_PREFIX + kind for kind in KINDS)})
"""The attacks whose adversary reads locations as grid cells (the ``cell`` column): the gate policy chooses their
resolutions (``resolutions_m``). Known points and home/work work in metres; membership reads the released
fragments' own cells."""


def attacks_for(release_kind: str) -> list[str]:
    """The names of the attacks that apply to a release kind (``"truthful"``, ``"synthetic"``, ``"aggregate"``)."""
    if release_kind not in RELEASE_KINDS:
        raise ParameterError(f"release kind must be one of {', '.join(RELEASE_KINDS)}, got {release_kind!r}",
                             "attack registry")
    return sorted(name for name, entry in ATTACKS.items() if release_kind in entry.release_kinds)


def build_attack(name: str, params: Mapping[str, Any] | None = None) -> Attack:
    """The attack registered as ``name``, configured by ``params`` (a mapping; unknown keys are errors).

    A parameter fixed by the name (e.g. ``kind`` for ``reidentification_location``) may be repeated with the
    same value but not changed.
    """
    entry = ATTACKS.get(name)
    if entry is None:
        raise ParameterError(f"unknown attack {name!r}; known: {', '.join(sorted(ATTACKS))}", "attack registry")
    given = dict(params or {})
    for key, value in entry.fixed.items():
        if key in given and given[key] != value:
            raise ParameterError(f"{key} is fixed to {value!r} by the attack name, got {given[key]!r}",
                                 f"{name}.{key}")
        given[key] = value
    from_dict = getattr(entry.params, "from_dict", None)
    built = from_dict(given) if from_dict is not None else Scope(name).from_mapping(entry.params, given)
    return entry.attack(built)
