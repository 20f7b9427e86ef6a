"""x_bench on Inspect's model requests: the one user of Inspect's private active-sample API.

Inspect exposes the running sample only through `inspect_ai.log._samples.sample_active()`
(an `ActiveSample` with `.sample`, the dataset `Sample`, and `.epoch`, 1-based).
`BeforeModelGenerate.sample_id` is a per-attempt uuid, not the dataset id, so the public
hook data is not enough. `check()` fails loudly when an Inspect upgrade moves that API.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import re

from inspect_ai.model import GenerateConfig

from resultlog.producer.inspect._errors import InspectPluginError

__all__ = ["TESTED_RANGE", "check", "current", "inspect_version", "stamp", "stamps"]

TESTED_RANGE = ((0, 3, 285), (0, 4, 0))
"""inspect-ai versions [low, high) whose private active-sample API this adapter was tested on."""

# Providers that send `extra_body` to an OpenAI-compatible chat-completions endpoint that
# tolerates unknown fields; other APIs (OpenAI's own, Anthropic, ...) may refuse them.
_STAMPED_PROVIDERS = ("openai-api/", "openrouter/")


def inspect_version() -> tuple[int, int, int]:
    """The installed inspect-ai version as (major, minor, micro)."""
    text = importlib.metadata.version("inspect_ai")
    parts = [int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3]]
    major, minor, micro = (*parts, 0, 0, 0)[:3]
    return major, minor, micro


def check() -> None:
    """Raise InspectPluginError unless the private active-sample API is what we rely on."""
    version = inspect_version()
    low, high = TESTED_RANGE
    shown = ".".join(map(str, version))
    if not low <= version < high:
        raise InspectPluginError(
            f"inspect-ai {shown} is outside the tested range "
            f"[{'.'.join(map(str, low))}, {'.'.join(map(str, high))}); "
            "install a tested version: pip install '/path/to/resultlog[inspect]'"
        )
    try:
        from inspect_ai.log._samples import ActiveSample, sample_active  # noqa: F401
    except ImportError as exc:
        raise InspectPluginError(f"inspect-ai {shown} has no sample_active(): {exc}") from exc
    params = inspect.signature(ActiveSample.__init__).parameters
    missing = [name for name in ("sample", "epoch") if name not in params]
    if missing:
        raise InspectPluginError(f"inspect-ai {shown}: ActiveSample has no {', '.join(missing)}")


def current() -> tuple[str, int] | None:
    """(dataset sample id, 0-based epoch) of the sample running in this context, if any."""
    from inspect_ai.log._samples import sample_active

    active = sample_active()
    if active is None:
        return None
    return str(active.sample.id), int(active.epoch) - 1


def stamps(model_name: str) -> bool:
    """True when requests to this model get x_bench (OpenAI-compatible chat completions)."""
    return model_name.startswith(_STAMPED_PROVIDERS)


def stamp(config: GenerateConfig, sample_id: str, epoch: int) -> None:
    """Put x_bench into the request's extra body, replacing any the user set."""
    # A new dict: the old one may be shared with the task's or the model's base config.
    body = dict(config.extra_body or {})
    body["x_bench"] = {"sample_id": sample_id, "sample_epoch": epoch}
    config.extra_body = body
