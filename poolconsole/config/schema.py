"""The JSON Schema of hosts.toml, with each field's attribute docstring as its description.

The models document their fields with attribute docstrings (the string under each field). Pydantic reads
those at class creation when `use_attribute_docstrings` is on, with `inspect.getsource` and a tokenize
of every model: 20-35 ms of every launch on this project's quiet 2-core machine, 80 ms when it is loaded
(config import medians of six: 187 against 204 ms, 297 against 384 ms), for descriptions only the schema
shows. So they are read here, once, from one parse of each module that defines hosts.toml's tables."""

from __future__ import annotations

import ast
import inspect
import json
from typing import Any

from pydantic import BaseModel

from poolconsole.config import alerting, engine_tables, models, remediation, strict

MODULES = (strict, alerting, remediation, engine_tables, models)
"""Where hosts.toml's tables are defined (config.models imports the others' back)."""
NAMES = frozenset(m.__name__ for m in MODULES)


def _docs_by_class() -> dict[str, dict[str, str]]:
    """Class name -> field name -> the docstring under that field, for the classes of MODULES."""
    found: dict[str, dict[str, str]] = {}
    for node in (n for m in MODULES for n in ast.parse(inspect.getsource(m)).body):
        if not isinstance(node, ast.ClassDef):
            continue
        docs = found.setdefault(node.name, {})
        for field, after in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(field, ast.AnnAssign)
                and isinstance(field.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[field.target.id] = inspect.cleandoc(after.value.value)
    return found


def _field_docs(model: type[BaseModel], by_class: dict[str, dict[str, str]]) -> dict[str, str]:
    docs: dict[str, str] = {}
    for base in reversed(model.__mro__):  # an inherited field keeps its class's docstring; a redefined one the child's
        if base.__module__ in NAMES:
            docs.update(by_class.get(base.__name__, {}))
    return {name: doc for name, doc in docs.items() if name in model.model_fields}


def json_schema() -> str:
    """The JSON Schema of hosts.toml, generated from the same models that validate it."""
    schema: dict[str, Any] = models.PoolConfig.model_json_schema()
    by_class = _docs_by_class()
    defs = schema.get("$defs", {})
    for model in vars(models).values():
        if not (isinstance(model, type) and issubclass(model, BaseModel) and model.__module__ in NAMES):
            continue
        where = schema if model is models.PoolConfig else defs.get(model.__name__)
        if where is None:
            continue
        properties = where.get("properties", {})
        for name, doc in _field_docs(model, by_class).items():
            if name in properties:
                properties[name].setdefault("description", doc)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "poolconsole hosts.toml"
    return json.dumps(schema, indent=2, sort_keys=True)
