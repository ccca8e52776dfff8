"""Escapes through the control plane (Prefect, Dask), each tried as the actor who would try it, and refused
(docs/design.md, "Decision codes and the control plane"):

- anyone on the machine, without the API authentication string, against the Prefect API;
- the requester, naming a Dask scheduler of their choice in a release spec (or a comparison spec);
- a local process connecting to a running release's Dask scheduler (without the cluster's certificates, or with a
  certificate of its own) to run code in the processes that hold raw data;
- a reader of the paused run's inputs after the steward answered (the decision code typed into the form);
- whoever read a code, presenting it again after the flow refused the steward's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import uuid

import httpx
import psutil
import pytest
import sqlalchemy as sa
import yaml
from distributed import Client
from distributed.security import Security

from tests.integration.conftest import (
    base_spec,
    cli,
    release_status,
    start_release,
    wait_for_status,
    wait_until,
)
from trajpub import config

pytestmark = pytest.mark.integration

API = config.prefect_api_url().rstrip("/")


def test_the_prefect_api_refuses_a_client_without_the_authentication_string():
    """Without credentials (or with a wrong string) every API route but the health probe answers 401; the string
    `trajpub server up` generated is accepted, and it is readable by the local user only."""
    anyone = httpx.Client(timeout=30)
    for method, path, body in (("POST", "/flow_runs/filter", {}), ("POST", "/deployments/filter", {}),
                               ("POST", "/variables/filter", {}), ("GET", "/admin/version", None)):
        assert anyone.request(method, API + path, json=body).status_code == 401, path
        assert anyone.request(method, API + path, json=body, auth=("trajpub", "guess")).status_code == 401, path
    assert anyone.get(API + "/health").status_code == 200
    user, password = config.local_prefect_auth().split(":", 1)
    assert anyone.post(API + "/flow_runs/filter", json={}, auth=(user, password)).status_code == 200
    assert config.PREFECT_AUTH_FILE.stat().st_mode & 0o077 == 0


def test_a_spec_cannot_name_a_dask_scheduler(engine, loaded_tdrive, tmp_path):
    """The requester's spec (file, or a comparison's shared part) naming ``dask_address`` is refused in one
    sentence before a release exists; the deployment's run form has no such field."""
    from pydantic import TypeAdapter

    from trajpub.spec import ReleaseSpec

    dataset = loaded_tdrive("daskaddr")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(base_spec(dataset, dask_address="tcp://127.0.0.1:9")))
    done = cli("release", "run", "--wait", "--spec", str(spec))
    assert done.returncode == 1
    assert done.stderr.strip() == ("error: a release spec cannot name a Dask scheduler: the operator sets it "
                                   "(TRAJPUB_DASK_ADDRESS, with its TLS certificates) (dask_address)")
    comparison = tmp_path / "compare.yaml"
    shared = {k: v for k, v in base_spec(dataset, dask_address="tcp://127.0.0.1:9").items()
              if k not in ("mechanism", "params")}
    comparison.write_text(yaml.safe_dump({"name": "c", **shared,
                                          "candidates": [{"mechanism": "adatrace", "params": {"epsilon": 1.0}}]}))
    done = cli("release", "compare", "--spec", str(comparison), "--yes")
    assert done.returncode == 1 and "cannot name a Dask scheduler" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM governance.releases WHERE dataset = :d"),
                            {"d": dataset}).scalar() == 0
    assert "dask_address" not in TypeAdapter(ReleaseSpec).json_schema()["properties"]


def listening(pid: int) -> set[tuple[str, int]]:
    """The TCP addresses (host, port) a process and its children listen on."""
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    found = set()
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            found |= {(c.laddr.ip, c.laddr.port) for c in proc.net_connections(kind="tcp")
                      if c.status == psutil.CONN_LISTEN}
    return found


def listening_ports(pid: int) -> set[int]:
    """The TCP ports a process and its children listen on."""
    return {port for _, port in listening(pid)}


class Stranger(Security):
    """Another local client's TLS settings, whatever this process's Dask configuration holds: it does not check
    the scheduler's certificate and presents ``certificate`` (a certificate and key of its own) or none; without
    ``tls`` it speaks plain TCP."""

    def __init__(self, tls: bool, certificate: Security | None = None) -> None:
        super().__init__(require_encryption=tls, tls_ca_file=None, tls_client_cert=None, tls_client_key=None)
        self.extra_conn_args = {"tls": tls, "certificate": certificate}

    def get_connection_args(self, role):
        context = None
        if self.extra_conn_args["tls"]:
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            own = self.extra_conn_args["certificate"]
            if own is not None:
                context.load_cert_chain(own.tls_client_cert, own.tls_client_key)
        return {"ssl_context": context, "require_encryption": self.extra_conn_args["tls"], "extra_conn_args": {}}


def own_certificate(directory) -> Security:
    """A certificate and key the stranger made for itself (files, as ``ssl`` loads them)."""
    made = Security.temporary()
    directory.mkdir(exist_ok=True)
    (directory / "cert.pem").write_text(made.tls_client_cert)
    (directory / "key.pem").write_text(made.tls_client_key)
    return Security(tls_client_cert=str(directory / "cert.pem"), tls_client_key=str(directory / "key.pem"))


def foreign_clients_run_code(ports: set[int], tmp_path) -> list[str]:
    """Connect to each port as another local client would (plain TCP; TLS with no certificate; TLS with a
    certificate of its own) and try to run code there; returns the ways that worked."""
    return clients_run_code(ports, {"tcp": Stranger(tls=False), "tls, no certificate": Stranger(tls=True),
                                    "tls, own certificate": Stranger(tls=True, certificate=own_certificate(
                                        tmp_path / "stranger"))})


def clients_run_code(ports: set[int], ways: dict[str, Security]) -> list[str]:
    """Try to run code on each port with each way's TLS settings, all attempts at once (a refused one waits out
    its whole connect timeout: one after another, they took a minute); returns the ways that worked."""

    async def runs_code(port: int, security: Security) -> bool:
        scheme = "tls" if security.require_encryption else "tcp"
        with contextlib.suppress(Exception):
            async with Client(f"{scheme}://127.0.0.1:{port}", timeout="5s", security=security,
                              asynchronous=True) as client:
                await client.run(lambda: 1)
                return True
        return False

    async def attempts() -> list[str]:
        tried = [(f"{way} on port {port}", runs_code(port, security))
                 for port in sorted(ports) for way, security in ways.items()]
        worked = await asyncio.gather(*(attempt for _, attempt in tried))
        return [name for (name, _), ok in zip(tried, worked) if ok]

    return asyncio.run(attempts())


def test_a_running_release_dask_cluster_runs_no_code_for_another_client(engine, loaded_tdrive, tmp_path,
                                                                         warm_dask, monkeypatch):
    """A release on a cluster of its own (no TRAJPUB_DASK_ADDRESS) and the session's shared cluster (which the
    tests' flows use as the operator's scheduler): no client without the cluster's certificates runs code on
    either scheduler or any of their workers, and the release's cluster listens on loopback only."""
    shared = int(warm_dask.rsplit(":", 1)[1])
    # the probe works: the client with the cluster's certificates (this process's Dask configuration) runs code
    assert clients_run_code({shared}, {"its certificate": Security(require_encryption=True)}) == [
        f"its certificate on port {shared}"]
    assert foreign_clients_run_code({shared}, tmp_path) == []
    monkeypatch.setenv("TRAJPUB_DASK_ADDRESS", "")  # the release starts a cluster of its own
    run = start_release(base_spec(loaded_tdrive("ownca"), approval_timeout_s=5), tmp_path)
    try:
        wait_until(lambda: run.release_id, 300, "the release to be planned")
        ports = wait_until(lambda: listening_ports(run.proc.pid), 120, "the release's Dask cluster to listen")
        assert release_status(engine, run.release_id) in ("planned", "validated", "protected"), \
            "the cluster was probed after the release's computation"
        assert foreign_clients_run_code(ports, tmp_path) == []
        # nothing of it (the scheduler's HTTP server included: /metrics, /json) listens beyond loopback
        assert {host for host, _ in listening(run.proc.pid)} <= {"127.0.0.1", "::1"}
        assert wait_for_status(engine, run, {"awaiting_approval", "blocked"}) in ("awaiting_approval", "blocked")
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait(timeout=30)


def flow_inputs(flow_run_id: str) -> list[str]:
    """Every input the Prefect server holds for the flow run (read with the API authentication string)."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        return [i.value for i in client.filter_flow_run_input(flow_run_id, key_prefix="", limit=200,
                                                              exclude_keys=set())]


def test_a_swapped_answer_is_refused_and_its_code_spent_and_gone_from_prefect(engine, loaded_tdrive, tmp_path):
    """Alice issues a code to reject with a comment; a holder of the Prefect API string, who deleted her answer
    before the flow read it, posts the same code with ``decision: approve``: the flow refuses it (the code was
    issued to reject) and the code is spent, so her own rejection presented after it is refused too. The API shows
    the paused run's inputs to no one without the authentication string, and the server holds no input with the
    code; the run forced to Running with no answer pauses again: the release still awaits a decision, with no
    approval recorded."""
    from prefect.flow_runs import resume_flow_run

    def paused(flow_run_id) -> bool:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            state = client.read_flow_run(flow_run_id).state
        return bool(state and state.is_paused())

    run = start_release(base_spec(loaded_tdrive("spent"), approval_timeout_s=300), tmp_path)
    try:
        wait_for_status(engine, run, {"awaiting_approval"})
        rid = run.release_id
        with engine.connect() as conn:
            flow_run_id = conn.execute(sa.text("SELECT flow_run_id FROM governance.releases WHERE release_id = :r"),
                                       {"r": rid}).scalar()
        wait_until(lambda: paused(flow_run_id), 60, "the flow to pause")
        issued = cli("steward", "code", str(rid), "--steward", "alice", "--decision", "reject",
                     "--comment", "too risky")
        assert issued.returncode == 0, issued.stderr
        code = issued.stdout.strip()
        resume_flow_run(flow_run_id, run_input={"release_id": rid, "decision": "approve", "comment": "",
                                                "decision_code": code})
        wait_until(lambda: run.output().count("the decision was refused") == 1 and paused(flow_run_id), 120,
                   "the flow to refuse the swapped approval and pause again")
        assert "was issued to rejected, not to approved" in run.output()

        anyone = httpx.Client(timeout=30)
        for path in (f"/flow_runs/{flow_run_id}/input/filter", "/flow_runs/filter"):
            assert anyone.post(API + path, json={"prefix": ""}).status_code == 401, path
        inputs = flow_inputs(flow_run_id)
        assert inputs and not [v for v in inputs if code in v]  # the review's description stays, not the answer

        from prefect.client.orchestration import get_client
        from prefect.states import Running

        with get_client(sync_client=True) as client:  # forced to Running with no answer: paused again
            client.set_flow_run_state(flow_run_id, Running(), force=True)
        wait_until(lambda: "resumed without an answer the form accepts" in run.output() and paused(flow_run_id), 120,
                   "the flow to pause again after being forced to Running")
        assert release_status(engine, rid) == "awaiting_approval"

        resume_flow_run(flow_run_id, run_input={"release_id": rid, "decision": "reject", "comment": "too risky",
                                                "decision_code": code})
        wait_until(lambda: run.output().count("the decision was refused") == 2 and paused(flow_run_id), 120,
                   "the flow to refuse the code presented again")
        assert "the decision code is not valid" in run.output()
        assert release_status(engine, rid) == "awaiting_approval"
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM governance.approvals WHERE release_id = :r"),
                                {"r": rid}).scalar() == 0
        done = cli("reject", str(rid), "--steward", "bob", "--comment", f"end of test {uuid.uuid4().hex[:6]}")
        assert done.returncode == 0, done.stderr
        assert run.proc.wait(timeout=180) == 0, run.output()[-3000:]
        assert release_status(engine, rid) == "rejected"
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait(timeout=30)
