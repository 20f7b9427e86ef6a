"""Inspect AI's entry point (`inspect_ai` group): importing this registers resultlog's hooks."""

from inspect_ai.hooks import hooks

from resultlog.producer.inspect._hooks import HOOKS_NAME, PublishingHooks

hooks(
    name=HOOKS_NAME,
    description="Publishes every finished (sample, epoch) to resultlog's Kafka results log.",
)(PublishingHooks)
