"""`python -m tests.soak` (`make soak`): a randomized fault soak of a three-broker cluster,
workers, aggregators and the offline model; see docs/faults.md.

SOAK_S seconds of faults (default 600; the cluster's start is not counted), SOAK_SEED to
replay one, SOAK_PLANT=1 to plant a wrong summary and a repeated request, SOAK_FIGURES for
where the figures go (default docs/_generated/soak.md). Exit 1 on any violation.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import traceback
from pathlib import Path
from types import FrameType

from tests.soak.report import FIGURES, closing_line, lines, write_figures
from tests.soak.soak import Soak


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    """Run one soak; 0 when it found no violation."""
    seconds = float(os.environ.get("SOAK_S") or 600)
    seed = int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(2**31))
    planted = os.environ.get("SOAK_PLANT") == "1"
    figures = Path(os.environ.get("SOAK_FIGURES") or FIGURES)
    signal.signal(signal.SIGTERM, _interrupt)
    print(f"soak: seed {seed} ({seconds:.0f}s{', planted' if planted else ''})", flush=True)
    soak = Soak(seed, seconds, planted)
    # The soak's own Kafka clients log each refused connection (a broker down is the point):
    # to a file, not the screen. Its own failures print to stdout.
    (soak.root / "logs").mkdir(parents=True, exist_ok=True)
    with (soak.root / "logs" / "soak.stderr").open("ab") as sink:
        os.dup2(sink.fileno(), 2)
    interrupted = failed = False
    try:
        soak.run()
    except KeyboardInterrupt:
        interrupted = True
        print("soak: interrupted; stopping everything it started", flush=True)
    except Exception:  # the soak's own failure: said in full, everything still stopped
        failed = True
        traceback.print_exc(file=sys.stdout)
    finally:
        outcome = soak.stop()
    for line in lines(outcome):
        print(line)
    if not (interrupted or failed):
        write_figures(outcome, figures)
    print(f"soak: seed {seed}")
    print(closing_line(outcome), flush=True)
    if outcome.violations:
        return 1
    return 130 if interrupted else 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
