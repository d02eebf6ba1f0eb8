"""What every ``regress check`` child pays to import: the check, never the bisect or the CLI."""

from __future__ import annotations

import subprocess
import sys

#: The modules the child (``python -m regress.check.child``) imports before the tree loads.
_CHILD = """
import sys
import regress.check.child, regress.check.check, regress.check.report
print(sorted(m for m in sys.modules if m.partition(".")[0] == "click" or m.startswith("regress.bisect")))
"""


def test_a_check_child_imports_neither_the_bisect_nor_the_cli():
    """A bisect runs one child per commit probed; ``regress.bisect`` alone cost ~0.15 s of each."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]", done.stdout
