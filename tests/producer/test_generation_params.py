"""--temperature and --max-tokens reach the model as request parameters (run and the solver)."""

from __future__ import annotations

import subprocess
import sys

from resultlog.producer import ModelClient, arith, model_solver
from resultlog.producer.offline import ModelServer


async def test_the_solver_sends_the_generation_parameters(
    model_server: ModelServer, model_client: ModelClient
) -> None:
    bench = arith()
    await model_solver(model_client, "m", temperature=0.3, max_tokens=64)(bench, bench.items[0])
    await model_solver(model_client, "m")(bench, bench.items[1])
    first, second = (request.body for request in model_server.requests)
    assert (first["temperature"], first["max_tokens"]) == (0.3, 64)
    assert "temperature" not in second and "max_tokens" not in second


def test_run_sends_them_for_every_pair(model_server: ModelServer, cli_env: dict[str, str]) -> None:
    args = ["run", "arith", "--model", "m", "--run-id", "params", "--limit", "3", "--json"]
    args += ["--base-url", model_server.base_url, "--temperature", "0", "--max-tokens", "7"]
    done = subprocess.run(
        [sys.executable, "-m", "resultlog.cli", *args], env=cli_env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    bodies = [request.body for request in model_server.requests]
    assert len(bodies) >= 3
    assert {(body["temperature"], body["max_tokens"]) for body in bodies} == {(0.0, 7)}


def test_a_temperature_out_of_range_is_a_one_line_error(cli_env: dict[str, str]) -> None:
    args = ["run", "arith", "--model", "m", "--run-id", "r", "--temperature", "nan"]
    done = subprocess.run(
        [sys.executable, "-m", "resultlog.cli", *args], env=cli_env, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "resultlog: error: resultlog run: argument --temperature: "
        "temperature must be between 0 and 2, got nan"
    ]
