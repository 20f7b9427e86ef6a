"""The roles of `resultlog acl grant`: least privilege, names from settings, one-line refusals."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from resultlog.acl import READER_GROUP_PREFIX, Acl, Role, role_acls
from resultlog.errors import KafkaClientError
from resultlog.kafka import topic_layouts
from resultlog.settings import Settings

SETTINGS = Settings(
    results_topic="r",
    summaries_topic="s",
    dlq_topic="d",
    leases_topic="l",
    spend_topic="sp",
    changelog_topic="c",
    index_topic="i",
    aggregator_group="agg",
    work_topic="w",
    work_dlq_topic="wd",
    work_group="workers",
    lm_eval_answers_topic="a",
)
READERS = Acl("User:x", "group", READER_GROUP_PREFIX, "DESCRIBE", prefixed=True)


def _rules(role: Role, group: str | None = None) -> set[tuple[str, str, str]]:
    acls = role_acls(SETTINGS, role, "User:x", group)
    assert READERS in acls  # every role reads through the assign()-only reader
    assert all(acl.principal == "User:x" for acl in acls)
    return {(acl.resource, acl.name, acl.operation) for acl in acls if acl != READERS}


def test_a_worker_writes_and_reads_results_and_takes_work() -> None:
    assert _rules(Role.WORKER) == {
        ("topic", "r", "WRITE"),
        ("topic", "r", "READ"),
        ("topic", "i", "READ"),
        ("topic", "l", "WRITE"),
        ("topic", "l", "READ"),
        ("topic", "sp", "WRITE"),
        ("topic", "sp", "READ"),
        ("topic", "sp", "DESCRIBE_CONFIGS"),
        ("topic", "w", "READ"),
        ("topic", "wd", "WRITE"),
        ("topic", "a", "WRITE"),
        ("topic", "a", "READ"),
        ("topic", "a", "DESCRIBE_CONFIGS"),
        ("group", "workers", "READ"),
        ("topic", "r", "DESCRIBE_CONFIGS"),
        ("topic", "i", "DESCRIBE_CONFIGS"),
        ("topic", "l", "DESCRIBE_CONFIGS"),
    }


def test_the_aggregator_reads_results_and_writes_summaries_and_dead_letters() -> None:
    assert _rules(Role.AGGREGATOR) == {
        ("topic", "r", "READ"),
        ("topic", "s", "WRITE"),
        ("topic", "d", "WRITE"),
        ("topic", "c", "WRITE"),
        ("topic", "c", "READ"),
        ("topic", "i", "WRITE"),
        ("topic", "i", "READ"),
        ("group", "agg", "READ"),
        *(("topic", name, "DESCRIBE_CONFIGS") for name in "rsdci"),
    }
    assert ("group", "other", "READ") in _rules(Role.AGGREGATOR, "other")


def test_a_viewer_reads_summaries_only() -> None:
    assert _rules(Role.VIEWER) == {("topic", "s", "READ"), ("topic", "s", "DESCRIBE_CONFIGS")}


@pytest.mark.parametrize("role", list(Role))
def test_a_role_reads_the_configuration_of_exactly_the_checked_topics_it_uses(role: Role) -> None:
    """Each topic whose layout clients check and the role uses: its configuration, no more."""
    acls = role_acls(SETTINGS, role, "User:x")
    used = {
        acl.name for acl in acls if acl.resource == "topic" and acl.operation != "DESCRIBE_CONFIGS"
    }
    described = {acl.name for acl in acls if acl.operation == "DESCRIBE_CONFIGS"}
    assert described == used & set(topic_layouts(SETTINGS))


def test_no_role_may_write_what_another_role_owns() -> None:
    writes = {
        role: {acl.name for acl in role_acls(SETTINGS, role, "User:x") if acl.operation == "WRITE"}
        for role in Role
    }
    assert "s" not in writes[Role.WORKER] and "r" not in writes[Role.AGGREGATOR]
    assert "i" not in writes[Role.WORKER]  # the run index is the aggregator's
    assert not writes[Role.VIEWER]


@pytest.mark.parametrize("principal", ["worker", "Group:x", "User:", "User: x", "User:a\nb"])
def test_a_principal_must_be_a_user(principal: str) -> None:
    with pytest.raises(KafkaClientError, match="principal must look like User:NAME"):
        role_acls(SETTINGS, Role.VIEWER, principal)


def test_granting_on_a_broker_without_authorizer_is_one_line(kafka_bootstrap: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESULTLOG_")}
    env["RESULTLOG_BOOTSTRAP_SERVERS"] = kafka_bootstrap
    command = ["acl", "grant", "--role", "viewer", "--principal", "User:v"]
    done = subprocess.run(
        [sys.executable, "-m", "resultlog.cli", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "runs no authorizer" in lines[0] and "kafka up --authorizer" in lines[0]
