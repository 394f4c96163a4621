#!/usr/bin/env bash
# Resolve the test suite's packages afresh (the newest releases within pyproject.toml's ranges) into a
# throwaway virtualenv, write them to requirements/test-constraints.txt, and run the fast tier against them.
# scripts/test.sh installs from that file, so a release that breaks the suite reaches it only through here,
# on purpose: review the diff, and commit it only when this script ends green.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
VENV="$(mktemp -d)/venv"
trap 'rm -rf "$(dirname "$VENV")"' EXIT
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q -U pip
"$VENV/bin/python" -m pip install -q -e '.[test]'
{
  echo "# The test suite's packages, pinned: scripts/test.sh installs with -c this file."
  echo "# Regenerated on purpose by scripts/update-constraints.sh, which runs the fast tier on them. $("$PY" --version)"
  "$VENV/bin/python" -m pip freeze --all --exclude-editable | grep -v -E '^(pip|poolconsole)==' | LC_ALL=C sort -f
} > requirements/test-constraints.txt
"$VENV/bin/python" -m pytest -p no:cacheprovider -q -x -m "not engine" "$@"
