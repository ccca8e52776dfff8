"""The steward's review: the pause form (answered in the Prefect UI or by the CLI) and the report it shows."""

from __future__ import annotations

import itertools
from typing import Literal, TypeVar

from prefect.client.orchestration import get_client
from prefect.exceptions import FlowPauseTimeout, ObjectNotFound, PrefectHTTPStatusError
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput, keyset_from_paused_state
from prefect.runtime import flow_run
from prefect.states import Paused
from pydantic import Field, ValidationError

from tasks import report
from tasks.review import Review
from trajpub import config


class StewardDecision(RunInput):
    """What the steward answers. The form cannot tell who fills it in: the decision code, issued to the steward's
    login for one decision by ``trajpub steward code RELEASE --steward LOGIN --decision approve|reject``, says who
    decides and what (the database records that login, that decision and the comment given with the code; an
    answer with another decision or comment is refused: sql/035). A decision already recorded with ``trajpub
    approve/reject`` resumes the flow without a code. A rejection needs a comment."""

    release_id: int = Field(description="The release under review (for reference; not editable in effect).")
    decision: Literal["approve", "reject"] = Field(description="Approve to publish; reject to stop it for good.")
    decision_code: str = Field(default="", description="Your one-time code for this decision: trajpub steward code "
                                                       "RELEASE --steward LOGIN --decision approve|reject")
    comment: str = Field(default="", description="Empty, or the comment you gave with the code.")


Answer = TypeVar("Answer", bound=RunInput)


def wait_for_answer(form: type[Answer], timeout_s: float, key: str) -> Answer | None:
    """Pause the flow run for the steward's ``form`` (a fresh ``key`` per question) and return the answer, or None
    after ``timeout_s``. Prefect stores an answer as the flow run's input, readable through its API, until deleted:
    it is deleted as soon as it is read, so the decision code typed into the form does not stay in Prefect (the
    code is spent by the flow's presentation anyway, accepted or not: sql/027). A run forced back to Running
    through the API with no answer, or with one the form does not accept, is paused again (with a fresh key):
    only an answer decides, and nothing is spent or failed meanwhile."""
    for attempt in itertools.count():
        asked = key if attempt == 0 else f"{key}-again-{attempt}"
        try:
            answer = pause_flow_run(wait_for_input=form, timeout=int(timeout_s), poll_interval=2, key=asked)
        except FlowPauseTimeout:
            return None
        except (ValidationError, ObjectNotFound, PrefectHTTPStatusError) as exc:
            if not_found_or_invalid(exc):
                print(f"the run was resumed without an answer the form accepts ({type(exc).__name__}): paused "
                      "again for the steward")
                answer = None
            else:
                raise
        response = keyset_from_paused_state(Paused(pause_key=asked))["response"]
        with get_client(sync_client=True) as client:
            try:
                client.delete_flow_run_input(flow_run.get_id(), response)
            except (ObjectNotFound, PrefectHTTPStatusError) as exc:  # no answer was stored under the key
                if not not_found_or_invalid(exc):
                    raise
        if answer is not None:
            return answer


def not_found_or_invalid(exc: Exception) -> bool:
    """An answer that is not there (Prefect's API says 404, in one of its two ways) or that the form refuses."""
    return not isinstance(exc, PrefectHTTPStatusError) or exc.response.status_code == 404


def review_markdown(review: Review) -> str:
    """The approval form's text of the review record: guarantee in plain words, budget, audit results against
    thresholds, utility, validation, the mechanism's run, and how to answer."""
    rel, g, s, release_id = review.release, review.guarantee, review.summary, review.release_id
    link = (f"[open the full review report](/artifacts/artifact/{s['report_artifact']})"
            if s.get("report_artifact") else "not published in the Prefect UI")
    console = f"{config.console_url()}/releases/{release_id}"
    lines = [f"# Release {release_id}: {rel['mechanism']} on `{rel['dataset']}`", "",
             (f"**Decide in the steward console:** [{console}]({console}) (sign in with your own database login: "
              "no code to copy)."), "",
             (f"**Full review report** (guarantee, budget, attacks with intervals, utility, density and "
              f"distribution plots): {link} — or `trajpub report {release_id} --out FILE` on any machine."), "",
             (f"Requested by **{rel['requested_by']}**; snapshot of {rel['snapshot_points']} points "
              f"(sha256 `{(rel['snapshot_hash'] or '')[:16]}`); window {review.window}."), "",
             "## Guarantee", "", g.get("statement", "(none stated)"), ""]
    lines += [f"- caveat: {c}" for c in g.get("caveats", [])]
    budget = review.budget
    lines += ["", "## Privacy budget (this release included)", "", f"**{budget[0]}** {budget[1]}", ""]
    lines += [f"- {line}" for line in budget[2:]]
    lines += ["", "## Linkage attacks", "", f"Gated by policy **{review.policy_label}**.", ""]
    if words := report.controls_words(s):
        lines += [words, ""]
    lines += [
              ("Grid-based attacks run at each cell size of the gate policy (the adversary's choice); the gate "
               "takes the worst."), "", report.DECIDE_ON_WORDS[review.decide_on], "",
              "| attack | cells | success | 95% CI | baseline | risk | risk 95% CI | threshold | verdict |",
              "|---|---|---|---|---|---|---|---|---|"]
    for a in review.audits:
        cells = f"{a['resolution_m']:g} m" if a["resolution_m"] else "-"
        threshold = "-" if a["threshold"] is None else format(a["threshold"], ".3f")
        if a["error"] is not None:
            lines.append(f"| {a['attack']} | {cells} | {a['outcome']}: {a['error']} | | | | | {threshold} | "
                         f"{report.attack_verdict(a)} |")
            continue
        lines.append(f"| {a['attack']} | {cells} | {a['success_rate']:.3f} | [{a['ci_low']:.3f}, {a['ci_high']:.3f}] | "
                     f"{a['baseline']:.4f} | {a['risk']:.3f} | {report.risk_interval(a)} | {threshold} | "
                     f"{report.attack_verdict(a)} |")
    gate = review.gate
    privacy, utility_verdict = report.verdicts(gate)
    lines += ["", f"**Gate verdicts** — privacy: **{privacy}**, utility: **{utility_verdict}**."]
    lines += [f"- {r}" for r in gate.get("reasons", [])]
    rows = report.utility_table(review.utility, gate.get("per_utility", {}))
    if rows:
        lines += ["", "## Utility", "", "| metric | value | limit | verdict |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    v = review.validation
    if v:
        lines += ["", "## Validation", "", (f"{v['n_quarantined']} of {v['n_rows']} raw points quarantined "
                                            f"(see staging.quarantine where release_id = {release_id}).")]
    m = review.mechanism_run
    if m:
        lines += ["", "## Mechanism run", "", (f"Released {m.get('released_records')} trajectories "
                                               f"({m.get('released_points')} points).")]
        for key in ("analytic_epsilon", "empirical_epsilon"):  # data-dependent ε of Pufferfish mechanisms
            if key in m:
                e = m[key]
                lines.append(f"- {e['kind']}: ε_x = {e['epsilon_x']:.4g}, ε_y = {e['epsilon_y']:.4g}, "
                             f"total {e['epsilon_total']:.4g}")
    lines += ["", (f"Approve or reject here with the decision code from `trajpub steward code {release_id} "
                   f"--steward LOGIN --decision approve|reject [--comment WHY]` (it records your login, that "
                   f"decision and that comment; an answer that says otherwise is refused), or with `trajpub approve {release_id} --steward "
                   f"NAME` / `trajpub reject {release_id} --steward NAME --comment WHY`.")]
    return "\n".join(lines)
