"""`smoke ENGINE --workload ... --ab PROFILE` on the demo pool (issue 15 item 4): the speculative engine
gpt-oss-120b-spark (EAGLE3 in the simulation) measured on its profile, rolled over (guarded, audited) to
the same model without a draft, measured again and rolled back; the verdict sets tok/s with and without
per workload; both runs stored and linked, each with what the engine itself reported. A rollover that
fails is rolled back, said, and exits 1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from poolconsole import cli
from poolconsole.ops import audit
from poolconsole.sim.demo import SimPool
from poolconsole.sim.hosts import BROKEN_PROFILE

ENGINE = "gpt-oss-120b-spark"
PROFILE = "fp8-131k"
PLAIN = "fp8-131k-nospec"


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[tuple[SimPool, Path]]:
    pool = SimPool(seed=3)
    await pool.start(tmp_path / "keys")
    try:
        await pool.wait_ready()
        load = pool.engines[ENGINE].load
        assert load is not None
        load.next_arrival = []  # the team stays away: per-stream tok/s is the measurement's own, not theirs
        text = pool.config_toml().replace("health_timeout_s = 20", "health_timeout_s = 6")
        # a profile on the speculative engine that never loads (the demo's broken profile name)
        marker = f'name = "{PLAIN}"'
        assert marker in text
        text = text.replace(
            marker,
            f'name = "{BROKEN_PROFILE}"\nformat = "demo"\nweights_gib = 63.0\n\n[[engines.profiles]]\n{marker}',
        )
        path = tmp_path / "demo.toml"
        path.write_text(text)
        yield pool, path
    finally:
        await pool.stop()


async def smoke_ab(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, config: Path, profile: str, *extra: str
) -> tuple[int, Any, str]:
    argv = [
        "smoke",
        ENGINE,
        "--config",
        str(config),
        "--db",
        str(tmp_path / "smoke.db"),
        "--audit-db",
        str(tmp_path / "audit.db"),
        "--workload",
        "code,chat",
        "--concurrency",
        "2",
        "--requests",
        "2",
        "--ab",
        profile,
        "--json",
        *extra,
    ]
    capsys.readouterr()
    code = await asyncio.to_thread(cli.main, argv)
    out = capsys.readouterr()
    return code, json.loads(out.out) if out.out.strip() else None, out.err


async def test_ab_measures_both_profiles_rolls_back_and_stores_both_runs_linked(
    demo: tuple[SimPool, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool, config = demo
    code, doc, said = await smoke_ab(capsys, tmp_path, config, PLAIN, "--yes")
    assert code == 0, (doc, said)
    ab = doc["ab"]
    assert ab["rollover"]["outcome"] == "ok" and ab["restore"]["outcome"] == "ok", ab
    assert ab["problem"] is None
    # both profiles measured, the same workloads on each
    measured = {(r["profile"], r["workload"]) for r in doc["results"] if r.get("workload")}
    assert measured == {(p, w) for p in (PROFILE, PLAIN) for w in ("code", "chat")}
    plain = [r for r in doc["results"] if r["profile"] == PLAIN and r.get("workload")]
    assert all(r["spec_decode_acceptance_rate"] is None for r in plain)  # no draft: no counters
    (summary,) = doc["spec_decode"]
    rows = {row["workload"]: row for row in summary["workloads"]}
    assert summary["ab"] is True and summary["without_profile"] == PLAIN
    code_row, chat_row = rows["code"], rows["chat"]
    assert code_row["keep"] is True and code_row["change_pct"] > 30, rows  # 0.74 accepted: far faster
    assert chat_row["keep"] is False and chat_row["change_pct"] < 0, rows  # 0.22: slower than no draft
    assert summary["verdict"].startswith(
        f"keep speculative decoding for: code (acceptance {code_row['acceptance_rate']:.2f}, "
        f"{code_row['change_pct']:+.0f} % tok/s); not for: chat ({chat_row['acceptance_rate']:.2f}, "
        f"{chat_row['change_pct']:+.0f} %)"
    )
    # back on the profile it served, promoted in the audit log, both rollovers audited
    assert pool.sim_hosts["spark"].profiles[ENGINE]["POOL_PROFILE"] == PROFILE
    assert audit.active_profile(tmp_path / "audit.db", ENGINE) == PROFILE
    rollovers = [e for e in audit.entries(tmp_path / "audit.db") if e.action == "rollover"]
    assert [(e.profile_from, e.profile_to, e.outcome) for e in reversed(rollovers)] == [
        (PROFILE, PLAIN, "ok"),
        (PLAIN, PROFILE, "ok"),
    ]
    # both runs stored with their conditions, linked, the engine's own report beside the profile
    capsys.readouterr()
    assert cli.main(["runs", "--db", str(tmp_path / "smoke.db"), "--json"]) == 0
    runs = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)}
    base_id, cand_id = ab["runs"]["baseline"], ab["runs"]["candidate"]
    assert set(runs) == {base_id, cand_id}
    base, cand = runs[base_id]["conditions"][ENGINE], runs[cand_id]["conditions"][ENGINE]
    assert base["profile"] == PROFILE and cand["profile"] == PLAIN and cand["profile_source"] == "audit log"
    for stored in (base, cand):
        assert stored["ab"]["baseline_run"] == base_id and stored["ab"]["candidate_run"] == cand_id
        assert stored["workloads"][0]["verdict"] == summary["verdict"]
    assert base["engine_reported"]["spec_decoding"] == "on" and cand["engine_reported"]["spec_decoding"] == "off"
    assert base["engine_reported"]["max_context"] == 131072  # /v1/models max_model_len
    # --compare sets the conditions side by side, the engine's report among them
    capsys.readouterr()
    compare = ["runs", "--db", str(tmp_path / "smoke.db"), "--compare", str(base_id), str(cand_id), "--json"]
    assert cli.main(compare) == 0
    diff = json.loads(capsys.readouterr().out)
    changed = {c["condition"]: (c["a"], c["b"]) for c in diff["conditions"] if "condition" in c}
    assert changed["profile"] == (PROFILE, PLAIN)
    assert changed["engine_reported.spec_decoding"] == ("on", "off")


async def test_a_rollover_that_fails_is_rolled_back_and_exits_1(
    demo: tuple[SimPool, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool, config = demo
    code, doc, _ = await smoke_ab(capsys, tmp_path, config, BROKEN_PROFILE, "--yes")
    assert code == 1, doc
    ab = doc["ab"]
    assert ab["rollover"]["outcome"] == "rolled back" and ab["restore"] is None
    assert ab["problem"].startswith(f"rollover to {BROKEN_PROFILE} rolled back: ")
    assert f"back on {PROFILE}" in ab["problem"] and ab["verdict"] is None
    assert {r["profile"] for r in doc["results"]} == {PROFILE}  # nothing measured on the broken one
    assert ab["runs"] == {"baseline": ab["runs"]["baseline"], "candidate": None} and ab["runs"]["baseline"]
    assert pool.sim_hosts["spark"].profiles[ENGINE]["POOL_PROFILE"] == PROFILE
    assert audit.entries(tmp_path / "audit.db")[0].outcome == "rolled back"


async def test_without_yes_nothing_runs(
    demo: tuple[SimPool, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool, config = demo
    code, doc, said = await smoke_ab(capsys, tmp_path, config, PLAIN)
    assert code == 2 and doc is None  # no terminal to ask: refused as a usage error, not a failed run
    assert "add --yes" in said and f"rollover to {PLAIN}" in said  # the plan is shown first
    assert not pool.sim_hosts["spark"].commands
    assert not (tmp_path / "smoke.db").exists()
