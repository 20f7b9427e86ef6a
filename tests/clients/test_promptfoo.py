"""promptfoo on the log: the example eval, killed and run again, against a real broker and the
offline model server; a changed config refused; two providers compared; the leases shared
with the Python writers."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from resultlog.analysis import compare_df
from resultlog.consumers import read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.producer import LeaseHeldError, claim_lease
from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.aggregator_process import aggregator_process
from tests.support.cli import printed_json, run_cli
from tests.support.kafka import raw_run_records
from tests.support.waiting import wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "clients" / "typescript" / "examples" / "promptfoo"
MODEL = "resultlog/offline-arith"
PROVIDER = f"openai:chat:{MODEL}"
CASES = 24  # the example's tests


def _install_env() -> dict[str, str]:
    """npm's environment for the example's install: native modules built from source against
    this Node's own headers when they are there (no prebuilt binary is downloaded offline)."""
    env = dict(os.environ)
    if Path("/usr/include/node/node_api.h").exists():
        env.setdefault("npm_config_nodedir", "/usr")
        env.setdefault("npm_config_build_from_source", "true")
    return env


@pytest.fixture(scope="session")
def promptfoo_example(ts_client: Path) -> Path:
    """The example with promptfoo installed and the client built. An install of the example's
    own is used as it is; else its node_modules links to one install per lock file in the
    user's cache (npm ci of about 1.5 GB, with a native module to build: once a machine)."""
    if not (EXAMPLE / "node_modules" / "promptfoo").is_dir():
        installed = _cached_install()
        link = EXAMPLE / "node_modules"
        if link.is_symlink():
            link.unlink()
        link.symlink_to(installed / "node_modules", target_is_directory=True)
    return EXAMPLE


def _cached_install() -> Path:
    """The example's packages installed under ~/.cache/resultlog, keyed by its lock file."""
    digest = hashlib.sha256((EXAMPLE / "package-lock.json").read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "resultlog"
    home = cache / f"promptfoo-example-{digest}"
    if (home / "node_modules" / "promptfoo").is_dir():
        return home
    part = cache / f"{home.name}.part-{uuid.uuid4().hex[:8]}"
    part.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy(EXAMPLE / name, part / name)
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"],
        cwd=part,
        env=_install_env(),
        capture_output=True,
        text=True,
        timeout=3000,
        check=False,
    )
    assert done.returncode == 0, f"npm ci of the example failed:\n{done.stderr[-3000:]}"
    try:
        part.rename(home)  # whole or not at all: a killed install leaves only a .part
    except OSError:  # another session installed it meanwhile
        shutil.rmtree(part)
    return home


def _env(cli_env: dict[str, str], server: ModelServer, run_id: str, home: Path) -> dict[str, str]:
    return {
        **cli_env,
        "RESULTLOG_PROMPTFOO_BASE_URL": server.base_url,
        "RESULTLOG_PROMPTFOO_MODEL": MODEL,
        "RESULTLOG_RUN_ID": run_id,
        "PROMPTFOO_CONFIG_DIR": str(home),  # promptfoo's own database: this test's
    }


def _eval(
    env: dict[str, str], out: Path, config: str = "promptfooconfig.yaml"
) -> subprocess.Popen[str]:
    """`npx promptfoo eval` of the example, in its own process group (a kill takes all)."""
    args = ["npx", "promptfoo", "eval", "-c", config, "--no-table", "-o", str(out)]
    return subprocess.Popen(
        args,
        cwd=EXAMPLE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


# promptfoo's exit code for an eval that ran to its end with a failed case.
FAILED_CASES_EXIT = 100


def _finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    out, err = process.communicate(timeout=300)
    return process.returncode, out + err


def _completed(code: int, printed: str) -> None:
    """The eval ran to its end (some cases may have failed their assertions)."""
    assert code in (0, FAILED_CASES_EXIT), printed[-3000:]


def _results(out: Path) -> list[dict[str, Any]]:
    results = json.loads(out.read_text())["results"]["results"]
    assert isinstance(results, list)
    return results


def _records(settings: Settings, run_key: RunKey) -> int:
    return len(read_run_records(KafkaConnection(settings), run_key).records)


@pytest.fixture
def slow_model() -> Iterator[ModelServer]:
    """The offline model, slow enough to kill an eval midway, never failing a request (every
    case then has a graded answer: promptfoo's pass rate is over the same cases as ours)."""
    with ModelServer(latency_s=0.25, error_rate=0.0) as server:
        yield server


@pytest.mark.slow
def test_a_killed_eval_run_again_pays_each_case_once(
    promptfoo_example: Path,
    settings: Settings,
    cli_env: dict[str, str],
    slow_model: ModelServer,
    tmp_path: Path,
) -> None:
    run_id = f"pf-{uuid.uuid4().hex[:8]}"
    run_key = RunKey(run_id, "arithmetic", PROVIDER)
    env = _env(cli_env, slow_model, run_id, tmp_path / "promptfoo")
    first = _eval(env, tmp_path / "first.json")
    wait_for(lambda: _records(settings, run_key) >= 8, "8 durable cases before the kill")
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate(timeout=60)
    asked_before = Counter((r.sample_id, r.epoch) for r in slow_model.requests)
    durable_at_kill = {
        r.sample_id for r in read_run_records(KafkaConnection(settings), run_key).records
    }
    in_flight = {pair for pair in asked_before if pair[0] not in durable_at_kill}

    started = time.monotonic()
    code, printed = _finish(_eval(env, tmp_path / "second.json"))
    resumed_s = time.monotonic() - started
    _completed(code, printed)
    assert (
        f"{CASES - len(durable_at_kill)} case(s) written, {len(durable_at_kill)} served" in printed
    )

    writes = Counter(record.key for record in raw_run_records(settings, run_key))
    assert len(writes) == CASES and set(writes.values()) == {1}, writes  # each case once
    asked = Counter((r.sample_id, r.epoch) for r in slow_model.requests)
    assert len(asked) == CASES
    twice = {pair for pair, count in asked.items() if count > 1}
    assert twice <= in_flight and max(asked.values()) <= 2, (twice, in_flight)

    results = _results(tmp_path / "second.json")
    replayed = printed_json(
        run_cli(
            cli_env,
            "replay",
            "--run-id",
            run_id,
            "--benchmark",
            "arithmetic",
            "--model",
            PROVIDER,
            "--json",
        )
    )
    successes = sum(1 for result in results if result["success"])
    assert replayed["records"] == len(results) == CASES
    assert replayed["accuracy"] == successes / len(results)
    print(f"resume took {resumed_s:.1f}s: {len(durable_at_kill)} served, {len(twice)} asked again")

    with aggregator_process(settings) as aggregator:  # the page of runs shows it like any other
        aggregator.wait_equal(settings, [run_key])


@pytest.mark.slow
def test_a_changed_config_is_refused_before_any_call(
    promptfoo_example: Path, settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    run_id = f"pf-{uuid.uuid4().hex[:8]}"
    with ModelServer(latency_s=0.002, error_rate=0.0) as server:
        env = _env(cli_env, server, run_id, tmp_path / "promptfoo")
        _completed(*_finish(_eval(env, tmp_path / "first.json")))
        asked = len(server.requests)
        changed = _variant("changed", _example_config().replace("is 77.", "is 78."))
        try:
            code, printed = _finish(_eval(env, tmp_path / "second.json", changed.name))
        finally:
            changed.unlink()
        assert code not in (0, FAILED_CASES_EXIT)
        assert "durable record(s) were made under another configuration" in printed
        assert len(server.requests) == asked  # refused before any call


@pytest.mark.slow
def test_two_providers_of_one_config_compare_with_mcnemar(
    promptfoo_example: Path, settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    run_id = f"pf-{uuid.uuid4().hex[:8]}"
    with (
        ModelServer(latency_s=0.002, error_rate=0.0, wrong_rate=0.3, seed=1) as a,
        ModelServer(latency_s=0.002, error_rate=0.0, wrong_rate=0.3, seed=2) as b,
    ):
        env = {**_env(cli_env, a, run_id, tmp_path / "promptfoo"), "RESULTLOG_B_URL": b.base_url}
        two = _variant("two", _two_providers(_example_config()))
        try:
            code, printed = _finish(_eval(env, tmp_path / "out.json", two.name))
        finally:
            two.unlink()
        _completed(code, printed)
    results = _results(tmp_path / "out.json")
    assert len(results) == 2 * CASES
    table = compare_df(
        (run_id, "arithmetic", "openai:chat:model-a"),
        (run_id, "arithmetic", "openai:chat:model-b"),
        kafka=settings,
    )
    assert len(table) == CASES
    flips = table.attrs["flips"]
    flipped = sorted(table.loc[table["flip"].notna(), "sample_id"])
    assert sorted(flips["c_to_i"] + flips["i_to_c"]) == flipped and flipped  # two seeds differ
    assert 0 < table.attrs["mcnemar_p"] <= 1


def _example_config() -> str:
    return (EXAMPLE / "promptfooconfig.yaml").read_text()


def _variant(name: str, text: str) -> Path:
    """A config beside the example's (its provider and hooks are named relative to it)."""
    path = EXAMPLE / f"promptfooconfig.{name}-{uuid.uuid4().hex[:8]}.yaml"
    path.write_text(text)
    return path


def _two_providers(config: str) -> str:
    """The example's config with two wrapped providers, model-a and model-b, on two servers."""
    one = config[
        config.index("  - id: file://resultlog-provider.js") : config.index("\nextensions:")
    ]
    a = one.replace("{{ env.RESULTLOG_PROMPTFOO_MODEL }}", "model-a")
    b = one.replace("{{ env.RESULTLOG_PROMPTFOO_MODEL }}", "model-b").replace(
        "RESULTLOG_PROMPTFOO_BASE_URL", "RESULTLOG_B_URL"
    )
    return config.replace(one, a + b)


def _lease_script(client: Path) -> Path:
    return client / "dist" / "test" / "promptfoo" / "leaseHolder.js"


@pytest.mark.parametrize("holder", ["typescript", "python"])
def test_typescript_and_python_leases_exclude_each_other(
    ts_client: Path, settings: Settings, cli_env: dict[str, str], holder: str
) -> None:
    run_key = RunKey(f"lease-{uuid.uuid4().hex[:8]}", "arithmetic", PROVIDER)
    args = [
        "node",
        str(_lease_script(ts_client)),
        run_key.run_id,
        run_key.benchmark_id,
        run_key.model,
    ]
    kafka = KafkaConnection(settings)
    if holder == "typescript":
        node = subprocess.Popen(
            args, env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            assert node.stdout is not None and node.stdout.readline().strip() == "held"
            with pytest.raises(LeaseHeldError, match=f"pid {node.pid}"):
                claim_lease(kafka, run_key, (0, CASES))
        finally:
            node.kill()  # SIGKILL: the lease stays on the topic, its holder known dead
            node.communicate(timeout=30)
        claim_lease(kafka, run_key, (0, CASES)).release()  # at once, not after the expiry
    else:
        with claim_lease(kafka, run_key, (0, CASES)):
            done = subprocess.run(
                args, env=cli_env, capture_output=True, text=True, timeout=120, check=False
            )
        assert done.returncode == 3, done.stderr
        assert "leased by host" in done.stderr and f"pid {os.getpid()}" in done.stderr


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value of every kind canonical JSON must write as Python does: integers, floats
    that are not integers (JavaScript cannot tell 1.0 from 1), any text, nested containers."""
    kind = rng.choice(["int", "float", "text", "bool", "null"] + ["list", "dict"] * (depth < 3))
    if kind == "int":
        return rng.randint(-(2**53) + 1, 2**53 - 1)
    if kind == "float":
        value = rng.uniform(-1, 1) * 10 ** rng.randint(-12, 30)
        return value if not value.is_integer() else 0.5
    if kind == "text":
        return "".join(chr(rng.choice(_CODE_POINTS)) for _ in range(rng.randint(0, 6)))
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {_random_value_key(rng): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


# ASCII with controls, Latin-1, the BMP's top and astral planes (sorted apart from UTF-16).
_CODE_POINTS = [*range(0, 128), 0xE9, 0x2028, 0xFFFF, 0xFF61, 0x1F600, 0x10000, 0x20AC]


def _random_value_key(rng: random.Random) -> str:
    return "".join(chr(rng.choice(_CODE_POINTS)) for _ in range(rng.randint(1, 3)))


def test_canonical_json_is_pythons_byte_for_byte(ts_client: Path) -> None:
    rng = random.Random(54)
    values = [_random_value(rng) for _ in range(300)]
    lines = "".join(json.dumps(value) + "\n" for value in values)  # ASCII on the way in
    script = ts_client / "dist" / "test" / "promptfoo" / "canonicalLines.js"
    done = subprocess.run(
        ["node", str(script)], input=lines, capture_output=True, text=True, timeout=60, check=True
    )
    python = [
        json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False) for v in values
    ]
    assert done.stdout.split("\n") == [*python, ""]  # not splitlines(): U+2028 is no line end


def test_the_example_needs_its_own_install_only() -> None:
    """promptfoo is the example's dependency, never the client's (`make test` never installs it)."""
    client = json.loads((EXAMPLE.parents[1] / "package.json").read_text())
    example = json.loads((EXAMPLE / "package.json").read_text())
    assert "promptfoo" not in {
        **client.get("dependencies", {}),
        **client.get("devDependencies", {}),
    }
    assert example["dependencies"]["promptfoo"].startswith("0.120.")
