"""What the bisect side-by-sides share: their flaky probe and the baseline, plain ``git bisect run``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

#: The probe every side-by-side runs under each tool: exits 1 where ``app.py`` has the bug, and on
#: a good commit exits 1 anyway with probability ``FLAKE_EPS``; it logs each run (the commit tested)
#: to ``FLAKE_STATE``, so runs are counted by the probe itself.
FLAKY_PROBE = """\
import os, pathlib, random, subprocess, sys
state = pathlib.Path(os.environ["FLAKE_STATE"])
runs = state.read_text().split() if state.exists() else []
head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
state.write_text(" ".join([*runs, head]))
if "BUG = True" in open("app.py").read():
    sys.exit(1)
rng = random.Random(f"{os.environ['FLAKE_SEED']}-{len(runs)}")
sys.exit(1 if rng.random() < float(os.environ["FLAKE_EPS"]) else 0)
"""


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
