"""A smoke run's results and a comparison's changes (ops.smoke runs, stores and compares them): what the smoke
screen, `poolconsole smoke` and `poolconsole runs` show, with a stored figure in the table's units."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from poolconsole.model.units import NA


@dataclass
class CheckResult:
    target: str
    model: str
    check: str
    passed: bool
    reason: str
    concurrency: int | None = None
    requests: int | None = None
    ttft_s: dict[str, float | None] | None = None
    connect_s: dict[str, float | None] | None = None
    """Connection set-up (name lookup, TCP, TLS) of the timed requests that opened a connection: mean,
    p95, connections; None when none did. It is part of TTFT, and said apart so that a slow accept
    (a full listen backlog drops SYNs: 1 s each) is not read as a slow engine."""
    itl_s: dict[str, float | None] | None = None
    output_tokens_per_s: dict[str, float | None] | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    workload: str | None = None
    """The workload a workload run (`smoke --workload`) measured; such a result also carries
    `spec_decode_acceptance_rate` (None with the reason in details["spec_decode"]["reason"])."""
    spec_decode_acceptance_rate: float | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if self.workload is None:  # only a workload run's results carry these two
            del out["workload"], out["spec_decode_acceptance_rate"]
        elif self.spec_decode_acceptance_rate is None:  # null with the reason, as status --json says it
            reason = (self.details.get("spec_decode") or {}).get("reason") or "not measured"
            out["unknown"] = {"spec_decode_acceptance_rate": reason}
        return out


def figure_words(figure: str, value: float | bool | None) -> str:
    """A stored figure as the console and `smoke --compare` show it: times (stored in seconds) in ms, rates
    in tok/s, the outcome as passed/FAILED, an unknown as n/a ('0.11472665650316571' had been printed raw)."""
    if value is None:
        return NA
    if figure == "passed":
        return "passed" if value else "FAILED"
    if figure.startswith(("ttft", "itl")):
        return f"{value * 1000.0:.4g} ms"
    return f"{value:.4g} tok/s"


@dataclass(frozen=True)
class Change:
    target: str
    model: str
    check: str
    concurrency: int | None
    figure: str
    baseline: float
    now: float
    regression: bool

    @property
    def change_pct(self) -> float:
        return (self.now - self.baseline) / self.baseline * 100 if self.baseline else 0.0

    def words(self) -> str:
        """One line in the table's units: 'qwen3-30b-a3b chat_stream c=4 ttft_p95: 120 ms -> 180 ms (+50.0%)'
        (seconds were shown bare, '0.07964 -> 0.1353', beside the table's milliseconds)."""
        return (
            f"{self.target} {self.check} c={self.concurrency} {self.figure}: "
            f"{figure_words(self.figure, self.baseline)} -> {figure_words(self.figure, self.now)} "
            f"({self.change_pct:+.1f}%)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "model": self.model,
            "check": self.check,
            "concurrency": self.concurrency,
            "figure": self.figure,
            "baseline": self.baseline,
            "now": self.now,
            "change_pct": round(self.change_pct, 1),
            "regression": self.regression,
        }
