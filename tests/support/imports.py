"""What importing a package loads, seen from a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys


def modules_loaded_by(package: str) -> set[str]:
    """Every module a fresh interpreter holds after `import package`."""
    probe = f"import sys, {package}; print('\\n'.join(sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(done.stdout.split())
