"""Linkage attacks, utility metrics and the gate policy: pure numpy/pandas/scipy, no Prefect, no database.

The auditor holds the raw data D and simulates an adversary against the candidate release D*; every attack
returns an :class:`AttackResult` (success rate, Wilson interval, baseline, baseline-corrected risk), and
:func:`evaluate_gate` compares the results with a :class:`GatePolicy`. Utility metrics are plain functions
in :mod:`audits.utility`.
"""

from audits.attack import Attack
from audits.gate import GateDecision, GatePolicy, evaluate_gate
from audits.result import AttackResult
from audits.signature_linkage import SignatureLinkage, SignatureLinkageParams

__all__ = [
    "Attack",
    "AttackResult",
    "GateDecision",
    "GatePolicy",
    "SignatureLinkage",
    "SignatureLinkageParams",
    "evaluate_gate",
]
