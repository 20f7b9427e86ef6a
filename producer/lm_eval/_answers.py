"""The answers topic: each answered lm-eval request, durable (acks=all) as it completes.

One compacted message per request, keyed `run key/a/<request key>` and written to the run
key's results partition, with a JSON value (the request type, the answer, its cost, the
document it was asked for). One more per run key, `run key/config`, holds the configuration
the answers were made under, so a changed rerun is refused before it asks anything.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from resultlog.kafka import KafkaClientError, KafkaConnection, arrived, produce_acked
from resultlog.producer.lm_eval._errors import LmEvalError
from resultlog.schemas import RunKey, partition_for, run_key_prefix

__all__ = ["Answer", "AnswerLog", "RunAnswers", "Tokens"]

_TIMEOUT_S = 30.0
_ANSWER = b"a/"
_CONFIG = b"config"
_TRANSIENT = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TRANSPORT,
    }
)


class Tokens(NamedTuple):
    """The tokens the endpoint reported for an answer."""

    input: int
    output: int
    total: int
    reasoning: int = 0

    def plus(self, other: Tokens | None) -> Tokens:
        """Both counts summed, field by field."""
        if other is None:
            return self
        return Tokens(*(mine + theirs for mine, theirs in zip(self, other, strict=True)))


@dataclass(frozen=True)
class Answer:
    """One answered request: lm-eval's response to it, what it cost (USD, 0: unknown) and
    the tokens the endpoint reported (None: it reported none)."""

    request_type: str
    response: Any
    cost: float = 0.0
    doc_id: int | None = None
    repeat: int = 0
    tokens: Tokens | None = None

    def encode(self) -> bytes:
        """The message value."""
        fields = {
            "type": self.request_type,
            "response": self.response,
            "cost": self.cost,
            "doc_id": self.doc_id,
            "repeat": self.repeat,
            "tokens": None if self.tokens is None else list(self.tokens),
        }
        return json.dumps(fields, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, value: bytes) -> Answer:
        """An answer from its message value (a log-likelihood's pair back as a tuple)."""
        fields = json.loads(value)
        response = fields["response"]
        if fields["type"] == "loglikelihood":
            response = (float(response[0]), bool(response[1]))
        tokens = fields.get("tokens")  # absent from answers written before tokens were kept
        return cls(
            fields["type"],
            response,
            fields["cost"],
            fields["doc_id"],
            fields["repeat"],
            Tokens(*tokens) if tokens is not None else None,
        )


@dataclass
class RunAnswers:
    """What the answers topic holds for one run key."""

    answers: dict[str, Answer]  # by request key
    config: str | None  # the configuration they were made under (canonical JSON)

    @property
    def spent(self) -> float:
        """What the run key's answered requests cost, in USD."""
        return sum(answer.cost for answer in self.answers.values())


class AnswerLog:
    """Reads and writes the answers topic; every write waits for the broker (acks=all)."""

    def __init__(self, kafka: KafkaConnection) -> None:
        self._kafka = kafka
        self._topic = kafka.settings.lm_eval_answers_topic
        self._producer = kafka.durable_producer({"linger.ms": 0})
        try:
            self._partitions = kafka.partition_count(self._topic, self._producer)
        except KafkaClientError as exc:
            raise LmEvalError(f"cannot use the answers topic {self._topic}: {exc}") from exc

    def read(self, run_key: RunKey) -> RunAnswers:
        """Every answer of the run key, and the configuration it was made under."""
        prefix = run_key_prefix(run_key)
        found = RunAnswers({}, None)
        try:
            for key, value in self._retried(partition_for(run_key, self._partitions)):
                if not key.startswith(prefix):
                    continue
                rest = key[len(prefix) :]
                if rest == _CONFIG and value is not None:
                    found.config = value.decode()
                elif rest.startswith(_ANSWER) and value is not None:
                    found.answers[rest[len(_ANSWER) :].decode()] = Answer.decode(value)
        except (KafkaException, ValueError, KeyError) as exc:
            raise LmEvalError(f"cannot read the answers of {run_key}: {exc}") from exc
        return found

    def write(self, run_key: RunKey, request_key: str, answer: Answer) -> None:
        """Make one answer durable; return once the broker acknowledged it."""
        self._write(run_key, _ANSWER + request_key.encode(), answer.encode())

    def write_config(self, run_key: RunKey, config: str) -> None:
        """Record the configuration the run key's answers are made under."""
        self._write(run_key, _CONFIG, config.encode())

    def close(self) -> None:
        """Flush what is in flight."""
        self._producer.flush(_TIMEOUT_S)

    def _write(self, run_key: RunKey, suffix: bytes, value: bytes) -> None:
        key = run_key_prefix(run_key) + suffix
        partition = partition_for(run_key, self._partitions)
        try:
            produce_acked(
                self._producer, self._topic, key, value, partition=partition, timeout_s=_TIMEOUT_S
            )
        except KafkaClientError as exc:
            raise LmEvalError(f"could not make an answer of {run_key} durable: {exc}") from exc

    def _retried(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        """The partition's messages, waiting out a leader election or a new topic's start."""
        deadline = time.monotonic() + _TIMEOUT_S
        while True:
            try:
                return self._messages(partition)
            except KafkaException as exc:
                error = exc.args[0]
                transient = isinstance(error, KafkaError) and error.code() in _TRANSIENT
                if not transient or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)

    def _messages(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        """(key, value) of every message of the partition below its high watermark."""
        consumer = self._kafka.reader()
        try:
            tp = TopicPartition(self._topic, partition)
            low, high = consumer.get_watermark_offsets(tp, timeout=_TIMEOUT_S, cached=False)
            if high <= low:
                return []
            consumer.assign([TopicPartition(self._topic, partition, OFFSET_BEGINNING)])
            read: list[tuple[bytes, bytes | None]] = []
            deadline = time.monotonic() + _TIMEOUT_S
            while time.monotonic() < deadline:
                for message in arrived(consumer, 500, 0.2):
                    if message.error() is not None:
                        raise KafkaException(message.error())
                    offset, key = message.offset() or 0, message.key()
                    if key is not None:
                        read.append((key, message.value()))
                    if offset >= high - 1:
                        return read
            raise LmEvalError(f"the answers topic did not reach offset {high} in time")
        finally:
            consumer.close()
