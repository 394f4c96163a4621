"""The JSON Schema's descriptions are the fields' attribute docstrings, read by config/schema.py from the
models' source (not by pydantic at every launch): equal to what pydantic's own `use_attribute_docstrings`
gives for the same models."""

from __future__ import annotations

import importlib.util
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from poolconsole.config import models
from poolconsole.config.schema import MODULES, json_schema

PLAIN = 'ConfigDict(extra="forbid", frozen=True, defer_build=True)'


def pydantics_own_schema(tmp_path: Path) -> dict[str, Any]:
    """The same models, with pydantic reading the docstrings itself (from a copy of their modules' source, in
    one module: the imports between them dropped, one `from __future__` on top)."""
    kept = [
        line
        for module in MODULES
        for line in inspect.getsource(module).splitlines()
        if not line.startswith(("from __future__ ", "from poolconsole.config."))
    ]
    source = "from __future__ import annotations\n" + "\n".join(kept) + "\n"
    assert source.count(PLAIN) == 1
    path = tmp_path / "models_read_by_pydantic.py"
    path.write_text(source.replace(PLAIN, 'ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)'))
    spec = importlib.util.spec_from_file_location("models_read_by_pydantic", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic finds each class's source through its module
    try:
        spec.loader.exec_module(module)
        schema: dict[str, Any] = module.PoolConfig.model_json_schema()
    finally:
        del sys.modules[spec.name]
    return schema


def test_descriptions_equal_pydantics_attribute_docstrings(tmp_path: Path) -> None:
    ours = json.loads(json_schema())
    assert ours.pop("title") == "poolconsole hosts.toml"
    assert ours.pop("$schema").endswith("2020-12/schema")
    reference = pydantics_own_schema(tmp_path)
    reference.pop("title")
    assert ours == reference
    assert "without SSH" in ours["$defs"]["Host"]["properties"]["local"]["description"]
    assert json.dumps(ours).count('"description"') > 100  # the fields' docstrings, not only the classes'


def test_the_models_do_not_read_their_source_at_import() -> None:
    assert not models.Strict.model_config.get("use_attribute_docstrings")
    assert models.Settings.model_fields["poll_interval_s"].description is None
