"""Ollama residency: unload a resident model (keep_alive 0), or preload one for a chosen time. Plan (the request
as a curl line, what is watched after) and run (ops.ollama: the request, then /api/ps until it shows, audited)."""

from __future__ import annotations

from poolconsole.config.models import EngineKind
from poolconsole.ops import lifecycle
from poolconsole.ops import ollama as ollama_ops
from poolconsole.workflows.plan import Plan, Refusal, refused
from poolconsole.workflows.workspace import Workspace

UNLOAD = "ollama unload"
PRELOAD = "ollama preload"


def _refusal(ws: Workspace, name: str, action: str) -> Plan | None:
    engine = ws.engine(name)
    if engine is None:
        return refused(action, name, f"no engine named {name} in the config", Refusal.CONFIG)
    if engine.kind is not EngineKind.OLLAMA:
        return refused(action, name, f"{name} is not an Ollama instance: nothing to load or unload", Refusal.CONFIG)
    if ws.read_only:
        return refused(action, name, "read-only mode", Refusal.REFUSED)
    return None


def plan_unload(ws: Workspace, name: str, model: str) -> Plan:
    no = _refusal(ws, name, UNLOAD)
    engine = ws.engine(name)
    if no is not None or engine is None:
        return no or refused(UNLOAD, name, f"no engine named {name}", Refusal.CONFIG)
    lines = (
        f"  $ {ollama_ops.plan(engine, model, 0)}",
        "then watch /api/ps until it no longer lists the model (its memory is free)",
    )
    return Plan(UNLOAD, name, f"Unload {model} from {name}?", lines, model=model)


def plan_preload(ws: Workspace, name: str, model: str, keep_alive: str) -> Plan:
    no = _refusal(ws, name, PRELOAD)
    engine = ws.engine(name)
    if no is not None or engine is None:
        return no or refused(PRELOAD, name, f"no engine named {name}", Refusal.CONFIG)
    value = ollama_ops.keep_alive_value(keep_alive)
    lines = (
        f"  $ {ollama_ops.plan(engine, model, value)}",
        "an embedding model, which Ollama does not let generate, loads through /api/embed instead:",
        f"  $ {ollama_ops.embed_plan(engine, model, value)}",
        "then watch /api/ps until it lists the model",
    )
    question = f"Preload {model} on {name} for {keep_alive}?"
    return Plan(PRELOAD, name, question, lines, model=model, keep_alive=keep_alive)


async def run(ws: Workspace, plan: Plan, progress: lifecycle.Progress) -> lifecycle.Outcome:
    engine = ws.engine(plan.engine)
    if engine is None or plan.model is None or plan.refused is not None:
        raise lifecycle.ActionRefused(plan.refused or f"{plan.engine}: nothing to load or unload")
    ctx = ollama_ops.OllamaContext(ws.audit_path, progress, ws.read_only)
    if plan.action == UNLOAD:
        return await ollama_ops.unload(ctx, engine, plan.model)
    assert plan.keep_alive is not None
    return await ollama_ops.preload(ctx, engine, plan.model, plan.keep_alive)
