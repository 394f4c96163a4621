#!/usr/bin/env python3
"""Plays back real captures on a test "host" behind a real sshd, answering exactly what is asked.

Installed on PATH under the name of the tool it plays (nvidia-smi, rocm-smi, amd-smi, sysctl, vm_stat,
macmon, uname). Reads $SHIM_SCENARIO (a JSON file):
  {"nvidia": {"gpus": [{field: value-with-units}], "apps": [...], "reject": [field...], "hang": false},
   "files": {"rocm-smi": "path", "amd-smi": "path", "vm_stat": "path", "sysctl": "path", "macmon": "path"},
   "uname": "Darwin"}
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

UNITS = re.compile(r"\s+(MiB|GiB|W|%|MHz|C|us)$")


def nvidia(scenario: dict[str, Any], argv: list[str]) -> int:
    cfg = scenario["nvidia"]
    if cfg.get("hang"):
        time.sleep(3600)
    query = next((a for a in argv if a.startswith("--query-gpu=") or a.startswith("--query-compute-apps=")), None)
    fmt = next((a.split("=", 1)[1] for a in argv if a.startswith("--format=")), "csv")
    if query is None:
        print("NVIDIA-SMI playback: only --query-gpu and --query-compute-apps are played back")
        return 0
    kind, fields = query.split("=", 1)
    names = fields.split(",")
    rows = cfg["gpus"] if kind == "--query-gpu" else cfg.get("apps", [])
    catalog = set().union(*(r.keys() for r in rows)) if rows else set(cfg.get("app_fields", []))
    for name in names:
        if name in cfg.get("reject", []) or (rows and name not in catalog):
            print(f'Field "{name}" is not a valid field to query.')
            print("\nRun 'nvidia-smi --help-query-gpu' for usage")
            return 2
    if kind == "--query-compute-apps" and not rows:
        if "noheader" not in fmt:
            print(", ".join(names))
        return 0
    if "noheader" not in fmt:
        print(", ".join(names))
    for row in rows:
        values = []
        for name in names:
            value = row[name]
            if "nounits" in fmt and not value.startswith("["):
                value = UNITS.sub("", value)
            values.append(value)
        print(", ".join(values))
    return 0


def main() -> int:
    tool = sys.argv.pop(1)  # the wrapper on PATH passes the name it was installed under
    scenario = json.loads(Path(os.environ["SHIM_SCENARIO"]).read_text())
    if tool == "nvidia-smi" and "nvidia" in scenario:
        return nvidia(scenario, sys.argv[1:])
    if tool == "uname":
        print(scenario.get("uname", "Linux"))
        return 0
    path = scenario.get("files", {}).get(tool)
    if path is None:
        print(f"{tool}: command not found", file=sys.stderr)
        return 127
    sys.stdout.write(Path(path).read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
