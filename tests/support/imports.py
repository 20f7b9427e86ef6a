"""What importing a package loads, seen from a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys


def modules_loaded_by(package: str, *, exports: bool = False) -> set[str]:
    """Every module a fresh interpreter holds after `import package` (and, with `exports`,
    after looking up every name of its `__all__`, which a lazy package loads on first use)."""
    touch = f"[getattr({package}, name) for name in {package}.__all__]; " if exports else ""
    probe = f"import sys, {package}; {touch}print('\\n'.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stdout.split())
