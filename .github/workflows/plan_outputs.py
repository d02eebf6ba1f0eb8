"""Turn `regress bot plan` JSON into GitHub step outputs (key=value lines on stdout).

Run by .github/workflows/bot.yml; kept as a file so no expression is interpolated into a script.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

plan = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
matrix = [
    {"stage": s["stage"], "argv": s["argv"], "junit_xml": s["junit_xml"], "runs_on": s["runs_on"]}
    for s in plan["stages"]
]
print(f"action={plan['action']}")
print(f"matrix={json.dumps(matrix, separators=(',', ':'))}")
print(f"fail_fast={'true' if plan['fail_fast'] else 'false'}")
print("refusal=")
