"""The baseline every bisect benchmark compares against: plain ``git bisect run`` in a clone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def real_git_bisect(
    repo: Path, copy: Path, good: str, bad: str, probe: Path, env: dict
) -> str | None:
    """Clone ``repo`` to ``copy``, run ``git bisect run python probe`` there; the culprit or None.

    A clone, so git's bisect refs and checkouts never touch the generated repository the regress
    runs read.
    """
    subprocess.run(["git", "clone", "-q", str(repo), str(copy)], check=True)
    subprocess.run(["git", "bisect", "start", bad, good], cwd=copy, check=True, capture_output=True)
    out = subprocess.run(
        ["git", "bisect", "run", sys.executable, str(probe)],
        cwd=copy,
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
    )
    found = re.search(r"([0-9a-f]{40}) is the first bad commit", out.stdout)
    return found.group(1) if found else None
