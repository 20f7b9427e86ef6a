"""The x_bench adapter's canary: fails loudly when an Inspect upgrade moves the private API.

x_bench needs the running sample's dataset id and epoch, which Inspect exposes only through
the private `inspect_ai.log._samples.sample_active()`. These tests run a real Inspect eval
(mockllm, no network) and check the adapter sees every sample; the wire is checked by the
end-to-end tests against the offline model server.
"""

from __future__ import annotations

from inspect_ai.log import EvalLog
from inspect_ai.model import GenerateConfig

from resultlog.producer.inspect import _xbench
from tests.producer.inspect_plugin.support import SEEN


def test_the_installed_inspect_has_the_private_api_the_adapter_uses() -> None:
    _xbench.check()
    low, high = _xbench.TESTED_RANGE
    assert low <= _xbench.inspect_version() < high


def test_the_adapter_sees_each_running_sample_and_its_0_based_epoch(mock_log: EvalLog) -> None:
    assert sorted(SEEN, key=str) == [("7", 0), ("7", 1), ("b", 0), ("b", 1)]


def test_outside_a_sample_nothing_is_running() -> None:
    assert _xbench.current() is None


def test_stamp_replaces_a_user_x_bench_keeps_other_fields_and_copies() -> None:
    user_body = {"x_bench": "user", "foo": 1}
    config = GenerateConfig(extra_body=user_body)
    _xbench.stamp(config, "q1", 1)
    assert config.extra_body == {"x_bench": {"sample_id": "q1", "sample_epoch": 1}, "foo": 1}
    assert user_body == {"x_bench": "user", "foo": 1}  # the task's own config is untouched


def test_only_openai_compatible_chat_providers_are_stamped() -> None:
    assert _xbench.stamps("openai-api/offline/arith")
    assert _xbench.stamps("openrouter/openai/gpt-4o")
    assert not _xbench.stamps("openai/gpt-4o")  # OpenAI refuses unknown body fields
    assert not _xbench.stamps("anthropic/claude-sonnet-4-0")
