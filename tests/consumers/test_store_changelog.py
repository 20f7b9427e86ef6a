"""A store restored from its changelog equals the in-memory fold bit for bit: after a writer
killed at any point of a flush, on the same machine or a new one, with the changelog fully
compacted; or the changelog is refused and the partition rebuilt, never trusted wrongly. A
restore killed after any of its writes is never trusted half done, and the changelog topic
reads back what was written to it."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resultlog.consumers import RunFold
from resultlog.consumers.aggregator.store import (
    MARKER_KEY,
    ChangelogError,
    ChangelogRecord,
    Entries,
    KafkaChangelog,
    LogIdentity,
    Opened,
    PartitionStore,
    check_meta,
    destroy,
    open_store,
    restore_changelog,
)
from resultlog.consumers.aggregator.store._codec import FENCE, untag, untagged
from resultlog.consumers.aggregator.store._files import OPEN_PATHS
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.consumers.test_state_store import DAY_MS, IDENTITY, RUNS
from tests.support.records import make_record
from tests.support.strategies import extreme_records

# One step: remove (or apply) a record in run 0 or 1, then maybe flush or be killed mid-flush
# (after `reached` records of it reached the changelog) and restart on this machine or another.
_steps = st.tuples(
    st.booleans(),
    extreme_records(),
    st.integers(0, 1),
    st.sampled_from(["none", "none", "none", "flush", "send", "fail", "kill", "new_machine"]),
    st.integers(0, 6),
)


class _Killed(BaseException):
    """The writer died mid-flush."""


class _Sent:
    """A write in a list: acknowledged once waited for (None: it failed)."""

    def __init__(self, offset: int | None) -> None:
        self.offset = offset

    def done(self) -> bool:
        return False  # heard of only when waited for: flushes stay in flight till then

    def wait(self) -> int:
        if self.offset is None:
            raise ChangelogError("the marker was never acknowledged")
        return self.offset


class ListChangelog:
    """A changelog partition in a list; `die_after` kills the next write after that many."""

    topic_id = "changelog-1"
    tag = b"writer-1"  # one writer: never fenced off

    def writer(self, partition: int) -> bytes:
        return self.tag

    def __init__(self) -> None:
        self.records: list[ChangelogRecord] = []
        self.die_after: int | None = None
        self.fail_after: int | None = None  # the next send fails after that many records
        self.end = 0  # the next offset: compaction never moves it

    def send(self, partition: int, entries: Entries, marker: bytes) -> _Sent:
        if self.fail_after is None:
            return _Sent(self.write(partition, entries, marker))
        for key, value in [*entries, (MARKER_KEY, marker)][: self.fail_after]:
            self.records.append(ChangelogRecord(self.end, key, self._tagged(value)))
            self.end += 1
        self.fail_after = None
        return _Sent(None)  # what reached the list stays: a later marker vouches for it

    def write(self, partition: int, entries: Entries, marker: bytes) -> int:
        for key, value in [*entries, (MARKER_KEY, marker)]:
            if self.die_after is not None and self.die_after <= 0:
                self.die_after = None
                raise _Killed
            if self.die_after is not None:
                self.die_after -= 1
            self.records.append(ChangelogRecord(self.end, key, self._tagged(value)))
            self.end += 1
        return self.end

    def _tagged(self, value: bytes | None) -> bytes | None:
        return None if value is None else value + self.tag

    def fence(self, tag: bytes) -> None:
        """A writer of this tag takes the partition: its fence, then its writes."""
        self.tag = tag
        self.records.append(ChangelogRecord(self.end, FENCE + tag, tag))
        self.end += 1

    def taken_back(self, since: int) -> list[ChangelogRecord]:
        """The records from offset `since` on, taken off: not delivered yet."""
        late = [r for r in self.records if r.offset >= since]
        self.records = [r for r in self.records if r.offset < since]
        self.end = since
        return late

    def delivered(self, late: list[ChangelogRecord]) -> None:
        """Records taken back, delivered now, at the end."""
        for record in late:
            self.records.append(record._replace(offset=self.end))
            self.end += 1

    def read(self, start: int, end: int) -> list[ChangelogRecord]:
        return [r for r in self.records if start <= r.offset < end]

    def compact(self) -> None:
        """Keep each key's last record only, as a full compaction does (offsets stay)."""
        last = {r.key: r.offset for r in self.records}
        self.records = [r for r in self.records if last[r.key] == r.offset]


def _open(root: Path, end: int, cache_keys: int, changelog: ListChangelog) -> Opened:
    opened = open_store(root, IDENTITY, 0, (0, end), max_age_ms=DAY_MS, cache_keys=cache_keys)
    opened.store.identity = IDENTITY
    opened.store.changelog = changelog
    return opened


def _killed(store: PartitionStore) -> None:
    """The process holding the store is gone, its unflushed writes with it."""
    store._disk.db.close()
    OPEN_PATHS.discard(store.path)


def _restart(
    root: Path, end: int, cache_keys: int, changelog: ListChangelog
) -> tuple[PartitionStore, dict[RunKey, RunFold], int]:
    """What an aggregator does on assignment: its store, brought up to date from the
    changelog; the folds and the results offset to read on from (0: rebuilt)."""
    opened = _open(root, end, cache_keys, changelog)
    store = opened.store
    start = 0 if opened.meta is None else opened.meta.changelog_offset
    refused = restore_changelog(store, changelog.read, (start, changelog.end), IDENTITY)
    if refused is not None and refused.reason == "lost_records":  # read it all, as it is
        store = destroy(store, cache_keys)
        refused = restore_changelog(store, changelog.read, (0, changelog.end), IDENTITY)
    if refused is None:
        refused = check_meta(store.meta(), IDENTITY, 0, (0, end), DAY_MS)
    if refused is not None:  # rebuilt from the results, the changelog emptied
        assert refused.reason in {"missing", "lost"}, refused
        changelog.records.clear()  # tombstoned: nothing of it is restored again
        store = destroy(store, cache_keys)
        store.identity, store.changelog = IDENTITY, changelog
        return store, {}, 0
    meta = store.meta()
    assert meta is not None
    return store, store.folds(), meta.next_offset


def _apply(fold: RunFold, remove: bool, record: SampleResult) -> None:
    if remove:
        fold.remove(record.sample_index, record.epoch)
    else:
        fold.apply(record)


@settings(max_examples=150, deadline=None)
@given(st.lists(_steps, min_size=1, max_size=40), st.integers(1, 5))
def test_a_store_restored_from_its_changelog_equals_the_in_memory_fold(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[bool, SampleResult, int, str, int]],
    cache_keys: int,
) -> None:
    changelog = ListChangelog()
    root = tmp_path_factory.mktemp("machine") / "state"
    store = _open(root, 0, cache_keys, changelog).store
    memory = {run_key: RunFold(run_key) for run_key in RUNS}
    disk = {run_key: store.new_fold(run_key) for run_key in RUNS}
    history: list[tuple[bool, SampleResult, int]] = []
    for remove, drawn, which, then, reached in steps:
        run_key = RUNS[which]
        record = drawn.model_copy(update={"run_id": run_key.run_id})
        history.append((remove, record, which))
        for fold in (memory[run_key], disk[run_key]):
            _apply(fold, remove, record)
        store.touched(disk[run_key])
        if then in {"kill", "new_machine"}:
            changelog.die_after = reached
            with contextlib.suppress(_Killed):
                store.flush(len(history))
            changelog.die_after = None
            _killed(store)
            if then == "new_machine":
                changelog.compact()
                root = tmp_path_factory.mktemp("machine") / "state"
            store, folds, start = _restart(root, len(history), cache_keys, changelog)
            disk = {k: folds.get(k) or store.new_fold(k) for k in RUNS}
            for again, item, index in history[start:]:  # the results tail, read again
                _apply(disk[RUNS[index]], again, item)
                store.touched(disk[RUNS[index]])
        elif then == "fail":  # the changelog never acknowledges: sent again with the next
            changelog.fail_after = reached
            store.flush(len(history))
        elif then == "send":  # in flight (in the changelog, not on disk) until the next flush
            store.flush(len(history), wait=False)
        elif then == "flush" or store.flush_due():
            store.flush(len(history))
        for key in RUNS:
            assert len(disk[key]) == len(memory[key])
            assert disk[key].summary().model_dump_json() == memory[key].summary().model_dump_json()
    store.close()


def test_a_new_machine_restores_a_compacted_changelog_and_reads_nothing_again(
    tmp_path: Path,
) -> None:
    changelog = ListChangelog()
    store = _open(tmp_path / "a", 0, 100, changelog).store
    fold, memory = store.new_fold(RUNS[0]), RunFold(RUNS[0])
    for offset, index in enumerate([0, 1, 2, 1, 0, 3]):
        record = make_record(index, 0, run_key=RUNS[0], value="CI"[offset % 2])
        fold.apply(record)
        memory.apply(record)
        store.touched(fold)
        store.flush(offset + 1)
    store.close()
    written = len(changelog.records)
    changelog.compact()
    assert len(changelog.records) < written
    restored, folds, start = _restart(tmp_path / "b", 6, 100, changelog)
    assert start == 6
    assert folds[RUNS[0]].summary() == memory.summary()
    restored.close()


def test_a_kept_store_that_missed_a_compacted_purge_is_restored_whole(tmp_path: Path) -> None:
    # Found by the soak (seed 168132919): a store read the changelog up to a flush, a purge's
    # tombstones were written after it, and compaction took them and the values they deleted
    # before the store read on. Read on from its offset, it kept the run.
    changelog = ListChangelog()
    store = _open(tmp_path / "a", 0, 100, changelog).store
    doomed, kept = store.new_fold(RUNS[0]), store.new_fold(RUNS[1])
    for index in range(3):
        for fold in (doomed, kept):
            fold.apply(make_record(index, 0, run_key=fold.run_key))
            store.touched(fold)
    store.flush(6)
    store.close()  # machine a stops, its store saved at the changelog's end
    other = _open(tmp_path / "b", 6, 100, changelog).store
    assert restore_changelog(other, changelog.read, (0, changelog.end), IDENTITY) is None
    folds = other.folds()
    for index in range(3):  # machine b folds the purge's tombstones
        folds[RUNS[0]].remove(index, 0)
        other.touched(folds[RUNS[0]])
    folds[RUNS[1]].apply(make_record(3, 0, run_key=RUNS[1]))
    other.touched(folds[RUNS[1]])
    other.flush(10)
    other.close()
    changelog.compact()
    changelog.records = [r for r in changelog.records if r.value is not None]  # tombstones gone
    store, folds, start = _restart(tmp_path / "a", 10, 100, changelog)
    assert RUNS[0] not in folds and start == 10
    assert folds[RUNS[1]].summary().records == 4
    store.close()


def test_a_run_rewritten_whole_after_the_last_marker_then_compacted_is_refused(
    tmp_path: Path,
) -> None:
    # A flush that landed whole yet was never acknowledged, its retry killed after rewriting
    # every key of a run, then compaction: that run's values before the marker are gone.
    changelog = ListChangelog()
    store = _open(tmp_path / "a", 0, 1, changelog).store
    first, second = store.new_fold(RUNS[0]), store.new_fold(RUNS[1])
    first.apply(make_record(0, 0, run_key=RUNS[0]))
    store.touched(first)
    changelog.fail_after = 0
    store.flush(1)
    store.touched(second)
    # The generation's marker, its three entries, the second run's totals, its marker.
    changelog.fail_after = 6
    store.flush(2)
    second.apply(make_record(0, 0, run_key=RUNS[1]))
    store.touched(second)
    changelog.die_after = 3
    with contextlib.suppress(_Killed):
        store.flush(3)
    _killed(store)
    changelog.compact()
    fresh = _open(tmp_path / "b", 3, 1, changelog).store
    refused = restore_changelog(fresh, changelog.read, (0, changelog.end), IDENTITY)
    assert refused is not None and refused.reason == "lost", refused
    fresh.close()


def test_records_a_fenced_off_writer_wrote_late_are_known_until_replaced() -> None:
    a, b = b"writer-a", b"writer-b"
    records = [
        (FENCE + a, a), (b"T1", b"1" + a), (FENCE + b, b), (b"T1", b"2" + b),
        (b"T1", b"1" + a), (b"\x00filler", b"x" + a), (b"L1", None),
    ]  # fmt: skip
    late: set[bytes] = set()
    entries, writer = untagged(records, None, late)
    assert writer == b and late == {b"T1"}  # a writer's own records, and no other key, stand
    assert entries == [  # fences are no store's state
        (b"T1", b"1"),
        (b"T1", b"2"),
        (b"T1", b"1"),
        (b"\x00filler", b"x"),
        (b"L1", None),
    ]
    assert untagged([(b"T1", b"3" + b)], writer, late) == ([(b"T1", b"3")], b)
    assert late == set()  # replaced by the fencing writer's later record
    untagged([(b"T1", b"4" + a)], None, late)
    assert late == set()  # before any fence, any writer's records are taken


def test_a_fenced_off_writers_late_flush_is_refused_by_a_new_machine(tmp_path: Path) -> None:
    # Found by the soak (seed 69776450): a writer's flush of a run's first record, queued in
    # its producer when its partition moved on, landed after the next writer had folded the
    # run on; a new machine restored the run's totals of 1 record over the run's 47 entries
    # and served them, fresh.
    changelog = ListChangelog()
    changelog.fence(b"writer-1")
    first = _open(tmp_path / "a", 0, 100, changelog).store
    other = first.new_fold(RUNS[1])
    other.apply(make_record(0, 0, run_key=RUNS[1]))
    first.touched(other)
    first.flush(1)  # its generation, whole
    run = first.new_fold(RUNS[0])
    run.apply(make_record(0, 0, run_key=RUNS[0]))
    first.touched(run)
    sent = changelog.end
    first.flush(2)
    _killed(first)
    late = changelog.taken_back(sent)  # the flush of the run's first record: not delivered
    changelog.fence(b"writer-2")
    second = _open(tmp_path / "b", 0, 100, changelog).store
    assert restore_changelog(second, changelog.read, (0, changelog.end), IDENTITY) is None
    run, other = second.new_fold(RUNS[0]), second.folds()[RUNS[1]]
    for index in range(47):
        run.apply(make_record(index, 0, run_key=RUNS[0]))
        second.touched(run)
    second.flush(48)
    changelog.delivered(late)
    other.apply(make_record(1, 0, run_key=RUNS[1]))
    second.touched(other)
    second.flush(49)  # a marker after the late records
    second.close()
    fresh = _open(tmp_path / "c", 49, 100, changelog).store
    refused = restore_changelog(fresh, changelog.read, (0, changelog.end), IDENTITY)
    assert refused is not None and refused.reason == "fenced", refused
    fresh.close()


def test_a_changelog_of_another_log_is_refused(tmp_path: Path) -> None:
    changelog = ListChangelog()
    store = _open(tmp_path / "a", 0, 100, changelog).store
    store.identity = LogIdentity("cluster-a", "results", "topic-id-0", 3)  # before a re-create
    fold = store.new_fold(RUNS[0])
    fold.apply(make_record(0, 0, run_key=RUNS[0]))
    store.touched(fold)
    store.flush(1)
    store.close()
    fresh = _open(tmp_path / "b", 1, 100, changelog).store
    refused = restore_changelog(fresh, changelog.read, (0, changelog.end), IDENTITY)
    assert refused is not None and refused.reason == "foreign_topic"
    fresh.close()


def test_a_restore_cut_short_is_finished_by_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("resultlog.consumers.aggregator.store._restore._BATCH", 2)
    changelog = ListChangelog()
    store = _open(tmp_path / "a", 0, 100, changelog).store
    fold, memory = store.new_fold(RUNS[0]), RunFold(RUNS[0])
    for offset in range(6):
        record = make_record(offset, 0, run_key=RUNS[0])
        fold.apply(record)
        memory.apply(record)
        store.touched(fold)
        store.flush(offset + 1)
    store.close()

    def killed(_offset: int) -> None:
        raise _Killed

    fresh = _open(tmp_path / "b", 6, 100, changelog).store
    with contextlib.suppress(_Killed):
        restore_changelog(fresh, changelog.read, (0, changelog.end), IDENTITY, killed)
    _killed(fresh)
    cut = _open(tmp_path / "b", 6, 100, changelog)
    assert cut.meta is not None and cut.meta.restoring and cut.next_offset is None
    assert check_meta(cut.meta, IDENTITY, 0, (0, 6), DAY_MS) is not None  # never served
    cut.store.close()
    restored, folds, start = _restart(tmp_path / "b", 6, 100, changelog)
    assert start == 6
    assert folds[RUNS[0]].summary() == memory.summary()
    restored.close()


def test_a_flush_in_flight_or_unacknowledged_loses_no_entry(tmp_path: Path) -> None:
    changelog = ListChangelog()
    store = _open(tmp_path / "a", 0, 1, changelog).store  # 1 key: evicts at every landing
    memory = {run_key: RunFold(run_key) for run_key in RUNS}
    disk = {run_key: store.new_fold(run_key) for run_key in RUNS}
    records = [make_record(index, 0, run_key=RUNS[index % 2]) for index in range(5)]

    def put(index: int) -> None:
        for folds in (memory, disk):
            folds[RUNS[index % 2]].apply(records[index])
        store.touched(disk[RUNS[index % 2]])

    put(0)
    changelog.fail_after = 1  # one entry reaches the changelog, its marker never does
    store.flush(1)
    put(1)
    store.flush(2, wait=False)  # in the changelog, not on disk
    put(2)
    put(3)
    store.flush(4)  # lands the one in flight (and evicts), then sends what changed since
    put(4)
    store.flush(5)
    store.close()
    changelog.compact()
    restored, folds, start = _restart(tmp_path / "b", 5, 1, changelog)
    assert start == 5
    for index, record in enumerate(records):  # removing finds every entry the flushes wrote
        run_key = RUNS[index % 2]
        memory[run_key].remove(record.sample_index, record.epoch)
        folds[run_key].remove(record.sample_index, record.epoch)
        restored.touched(folds[run_key])
        assert len(folds[run_key]) == len(memory[run_key])
        assert folds[run_key].summary() == memory[run_key].summary()
    restored.close()


class _Acked(_Sent):
    """A write heard of as soon as `heard` is set."""

    heard = False

    def done(self) -> bool:
        return self.heard


class _HeldChangelog(ListChangelog):
    """A changelog whose last write is acknowledged only when the test says so."""

    def send(self, partition: int, entries: Entries, marker: bytes) -> _Acked:
        self.last = _Acked(self.write(partition, entries, marker))
        return self.last


def test_a_full_store_folds_on_while_its_flush_before_is_in_flight(tmp_path: Path) -> None:
    changelog = _HeldChangelog()
    store = _open(tmp_path / "a", 0, 8, changelog).store  # a flush is due at 8 keys
    fold = store.new_fold(RUNS[0])
    records = iter(make_record(index, 0, run_key=RUNS[0]) for index in range(100))

    def fill(keys: int) -> None:
        while store.pending < keys:
            fold.apply(next(records))

    fill(8)
    assert store.flush_due()
    store.flush(1, wait=False)
    fill(8)
    assert not store.flush_due()  # the one before is unacknowledged: it waits, the thread folds on
    fill(30)  # a record changes two keys: 30 or 31
    assert not store.flush_due()
    fill(32)
    assert store.flush_due()  # four times the keys pending: now it waits for the acknowledgement
    changelog.last.heard = True
    assert store.flush_due()
    store.flush(2, wait=False)
    assert store.pending == 0
    changelog.last.heard = True
    store.land()
    meta = store.meta()
    assert meta is not None and meta.changelog_offset == changelog.end
    store.close()


class _Dying:
    """A store's database that SIGKILLs its process right after its `after`-th write or
    flush (what a restore writes: the kill point)."""

    def __init__(self, db: Any, after: int) -> None:
        self._db = db
        self._left = after

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def write(self, *args: Any) -> None:
        self._db.write(*args)
        self._counted()

    def flush(self, wait: bool = True) -> None:
        self._db.flush(wait)
        self._counted()

    def _counted(self) -> None:
        self._left -= 1
        if self._left == 0:
            os.kill(os.getpid(), signal.SIGKILL)


def _restore_then_die(root: Path, records: list[ChangelogRecord], after: int) -> None:
    """In a process of its own: restore the changelog into root's store, killed right after
    the `after`-th write or flush of it (or never, if it makes fewer)."""
    changelog = ListChangelog()
    changelog.records, changelog.end = records, records[-1].offset + 1
    store = _open(root, 6, 100, changelog).store
    start = store.changelog_offset if store.covers is not None else 0
    store._disk.db = _Dying(store._disk.db, after)  # type: ignore[assignment]  # a stand-in
    with mock.patch("resultlog.consumers.aggregator.store._restore._BATCH", 2):
        restore_changelog(store, changelog.read, (start, changelog.end), IDENTITY)
    store.close()


@pytest.mark.slow  # a child killed at each of up to 30 points
@pytest.mark.parametrize("holding", [0, 2], ids=["new machine", "catching up"])
def test_a_restore_killed_after_any_write_is_never_trusted_before_it_is_whole(
    tmp_path: Path, holding: int
) -> None:
    # A restore writes without the write-ahead log: its meta must never reach the disk
    # before the entries it vouches for, whatever write a SIGKILL follows.
    changelog = ListChangelog()
    store = _open(tmp_path / "a", 0, 100, changelog).store
    fold = store.new_fold(RUNS[0])
    for offset in range(6):
        fold.apply(make_record(offset % 4, offset // 4, run_key=RUNS[0], value="CI"[offset % 2]))
        store.touched(fold)
        store.flush(offset + 1)
    store.close()
    flushes = [r.offset + 1 for r in changelog.records if r.key == MARKER_KEY]
    whole = {end: _restored_to(tmp_path / f"whole-{end}", changelog, end) for end in flushes}
    seen: set[str] = set()
    spawned = multiprocessing.get_context("spawn")  # a fork would inherit RocksDB's threads
    for after in range(1, 30):
        root = tmp_path / f"b{after}"
        if holding:  # this machine's store holds the first flushes
            _restored_to(root, changelog, flushes[holding - 1])
        child = spawned.Process(target=_restore_then_die, args=(root, changelog.records, after))
        child.start()
        child.join(60)
        cut = _open(root, 6, 100, changelog)
        meta = cut.meta
        if meta is not None and not meta.restoring:  # trusted: then whole up to its offset
            assert _entries(cut.store) == whole[meta.changelog_offset]
        cut.store.close()
        restored, _, start = _restart(root, 6, 100, changelog)
        assert start == 6 and _entries(restored) == whole[changelog.end]  # completed
        restored.close()
        seen.add("none" if meta is None else "restoring" if meta.restoring else "trusted")
        if child.exitcode == 0:
            break
        assert child.exitcode == -signal.SIGKILL
    assert child.exitcode == 0  # the last one was never killed: every kill point was tried
    assert seen == {"restoring", "trusted"} | ({"none"} if not holding else set())


def _restored_to(root: Path, changelog: ListChangelog, end: int) -> dict[bytes, bytes]:
    """Restore the changelog's flushes up to offset `end` into root's store: its entries."""
    store = _open(root, 6, 100, changelog).store
    assert restore_changelog(store, changelog.read, (0, end), IDENTITY) is None
    entries = _entries(store)
    store.close()
    return entries


def _entries(store: PartitionStore) -> dict[bytes, bytes]:
    """Every entry of the store but its meta."""
    return {key: value for key, value in store.items(b"") if key != MARKER_KEY}


def test_the_changelog_topic_reads_back_a_range_as_records_and_as_lists(
    settings: Settings,
) -> None:
    with KafkaConnection(settings) as kafka:
        changelog = KafkaChangelog(kafka)
        try:
            written: Entries = [(b"k%d" % i, None if i % 5 == 4 else b"v%d" % i) for i in range(25)]
            assert changelog.fence(0) == 1  # a writer's first record: its fence
            tag = changelog.writer(0)
            changelog.write(0, written[:12], b"m1")
            end = changelog.write(0, written[12:], b"m2")
            assert changelog.bounds(0) == (0, end) == (0, 28)
            every = [
                (FENCE + tag, b""), *written[:12], (MARKER_KEY, b"m1"),
                *written[12:], (MARKER_KEY, b"m2"),
            ]  # fmt: skip
            records = list(changelog.read(0, 3, 20))
            assert all(r.value is None or r.value.endswith(tag) for r in records)
            assert [(r.key, untag(r.value)) for r in records] == every[3:20]
            assert [r.offset for r in records] == list(range(3, 20))
            lists = list(changelog.entries(0, 3, end, size=5))
            assert [(k, untag(v)) for _, entries in lists for k, v in entries] == every[3:]
            assert [reached for reached, _ in lists] == [8, 13, 18, 23, 28]
            assert list(changelog.read(0, 5, 5)) == [] and list(changelog.entries(0, 9, 9)) == []
        finally:
            changelog.close()
