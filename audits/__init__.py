"""Linkage attacks, utility metrics and the gate policy: pure numpy/pandas/scipy, no Prefect, no database.

The auditor holds the raw data D and simulates an adversary against the candidate release D*; every attack
returns an :class:`AttackResult` (success rate, Wilson interval, baseline, baseline-corrected risk), and
:func:`evaluate_gate` compares the results with a :class:`GatePolicy`. :data:`ATTACKS` (:mod:`audits.registry`)
names every attack with the release kinds it applies to. Utility metrics are plain functions in
:mod:`audits.utility` (the gate's names and the distribution errors), :mod:`audits.point_utility`,
:mod:`audits.patterns` and :mod:`audits.trajectory_utility`, over the frames of :mod:`audits.planar`.
"""

from audits.ap_attack import APAttack, APAttackParams
from audits.attack import Attack
from audits.gate import GateDecision, GatePolicy, evaluate_gate
from audits.home_work import HomeWorkInference, HomeWorkParams
from audits.known_points import KnownPoints, KnownPointsParams
from audits.membership import MembershipInference, MembershipParams
from audits.registry import ATTACKS, RegisteredAttack, attacks_for, build_attack
from audits.reidentification import Reidentification, ReidentificationParams, reidentification_risks
from audits.result import AttackResult
from audits.signature_linkage import SignatureLinkage, SignatureLinkageParams

__all__ = [
    "ATTACKS",
    "APAttack",
    "APAttackParams",
    "Attack",
    "AttackResult",
    "GateDecision",
    "GatePolicy",
    "HomeWorkInference",
    "HomeWorkParams",
    "KnownPoints",
    "KnownPointsParams",
    "MembershipInference",
    "MembershipParams",
    "RegisteredAttack",
    "Reidentification",
    "ReidentificationParams",
    "SignatureLinkage",
    "SignatureLinkageParams",
    "attacks_for",
    "build_attack",
    "evaluate_gate",
    "reidentification_risks",
]
