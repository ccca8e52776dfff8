"""FASTPub: federated LDP publication of frequent trajectory fragments (Wang, Zhu, Wang, Han, IEEE TMC 2022),
with the paper's two baselines TrieHH and SFP.

The package is split along the protocol's trust boundary:

* SERVER: :func:`run_server` (``server``; baselines in ``triehh``, ``sfp``) sees only plans and aggregated
  answers; it imports nothing from the client side.
* SEAM: ``protocol``: :class:`RoundPlan` / :class:`RoundAnswers` (and the baselines' plan/answer types), the
  :class:`ClientPopulation` protocol, :func:`split_plan`, :func:`combine_answers`.
* CLIENT: :func:`respond_partition` (``client``) runs next to the raw data, one partition at a time;
  :class:`InMemoryPopulation` holds data in memory; :func:`fastpub` is the one-call in-memory run.

Plus :class:`FastPubParams`, :func:`guarantee`, :func:`theorem4_bound` and the paper's metrics.
"""

from mechanisms.fastpub.client import respond, respond_partition, respond_partition_per_client
from mechanisms.fastpub.database import CountingDatabase
from mechanisms.fastpub.fragments import apriori_join, check_csr, group_duplicates, is_fragment_of
from mechanisms.fastpub.guarantee import guarantee
from mechanisms.fastpub.mechanism import fastpub
from mechanisms.fastpub.metrics import (
    FsmScore,
    frequent_fragments,
    median_relative_error,
    precision_recall_f1,
    relative_errors,
    support_counts,
)
from mechanisms.fastpub.params import METHODS, FastPubParams, noise_factor, theorem4_bound
from mechanisms.fastpub.population import InMemoryPopulation
from mechanisms.fastpub.protocol import (
    ClientPopulation,
    RoundAnswers,
    RoundPlan,
    SfpPlan,
    SfpSketches,
    TriePlan,
    TrieVotes,
    combine_answers,
    split_plan,
)
from mechanisms.fastpub.result import FastPubResult, PublishedFragment, RoundLog
from mechanisms.fastpub.server import admission_margin, admission_threshold, run_server, unbiased_estimate

__all__ = [
    "METHODS",
    "ClientPopulation",
    "CountingDatabase",
    "FastPubParams",
    "FastPubResult",
    "FsmScore",
    "InMemoryPopulation",
    "PublishedFragment",
    "RoundAnswers",
    "RoundLog",
    "RoundPlan",
    "SfpPlan",
    "SfpSketches",
    "TriePlan",
    "TrieVotes",
    "admission_margin",
    "admission_threshold",
    "apriori_join",
    "check_csr",
    "combine_answers",
    "fastpub",
    "frequent_fragments",
    "group_duplicates",
    "guarantee",
    "is_fragment_of",
    "median_relative_error",
    "noise_factor",
    "precision_recall_f1",
    "relative_errors",
    "respond",
    "respond_partition",
    "respond_partition_per_client",
    "run_server",
    "split_plan",
    "support_counts",
    "theorem4_bound",
    "unbiased_estimate",
]
