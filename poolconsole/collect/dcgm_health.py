"""GPU health from NVIDIA's DCGM exporter read through Prometheus (issue 37): the fields that feed gpu_xid and
gpu_ecc for a host whose GPUs are read with `read = "prometheus"`, as the SSH path's nvidia-smi and kernel
log feed them.

- `DCGM_FI_DEV_XID_ERRORS` is the value of the last Xid the GPU raised, and it keeps that value: a non-zero
  value alone says only that an Xid happened since the exporter started. An Xid counts as recent (the SSH
  path's "last 5 minutes") when the value changed in the last 5 minutes: the query adds
  `changes(DCGM_FI_DEV_XID_ERRORS[5m])` under the name XID_CHANGES. Without that series, unknown.
- `DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`: double-bit (uncorrected) volatile ECC errors since the driver loaded, as
  nvidia-smi's `ecc.errors.uncorrected.volatile.total`; `DCGM_FI_DEV_ROW_REMAP_PENDING` and
  `DCGM_FI_DEV_RETIRED_PENDING`: a row remap or a page retirement waiting.

A field the exporter does not export stays unknown (None), never 0. Pure: series in, readings out."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from poolconsole.model.hosts import GpuReading

XID = "DCGM_FI_DEV_XID_ERRORS"
ECC_DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"
RETIRED_PENDING = "DCGM_FI_DEV_RETIRED_PENDING"
XID_CHANGES = "poolconsole_dcgm_xid_changes_5m"
"""The name the query gives `changes(DCGM_FI_DEV_XID_ERRORS[5m])` (changes() drops the metric's name)."""
NAMES = (XID, ECC_DBE, REMAP_PENDING, RETIRED_PENDING, XID_CHANGES)
"""The DCGM exporter's health families a host reading selects (XID_CHANGES is made by the query)."""


class Sample(Protocol):
    """One series of an instant vector (collect's Series)."""

    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def value(self) -> float: ...


def xid_changes(sel: str) -> str:
    """The PromQL term that brings XID_CHANGES for the series under the matchers `sel` (without braces), to be
    joined with `or` to the raw series: `or` matches label sets without the metric name, so the term also
    carries a label of its own (`poolconsole_term`), or the raw Xid series would hide it."""
    named = f'label_replace(changes({XID}{{{sel}}}[5m]), "__name__", "{XID_CHANGES}", "", "")'
    return f'label_replace({named}, "poolconsole_term", "xid_changes", "", "")'


def _fields(series: Iterable[Sample]) -> dict[int, dict[str, float]]:
    """gpu index -> name -> value, a whole GPU's series before its MIG instances' (GPU_I_ID)."""
    out: dict[int, dict[str, float]] = {}
    ordered = sorted(series, key=lambda s: "GPU_I_ID" in s.labels)
    for s in ordered:
        name, gpu = s.labels.get("__name__", ""), s.labels.get("gpu", "")
        if name not in NAMES or not gpu.isdigit() or not math.isfinite(s.value):
            continue
        out.setdefault(int(gpu), {}).setdefault(name, s.value)
    return out


def with_health(gpus: Sequence[GpuReading], series: Iterable[Sample]) -> list[GpuReading]:
    """The GPUs with what the DCGM exporter says of their Xids and ECC; a GPU without those series as it was."""
    found = _fields(series)
    out = []
    for gpu in gpus:
        fields = found.get(gpu.index) if gpu.index is not None else None
        if not fields:
            out.append(gpu)
            continue
        xids = gpu.xids
        if XID in fields and XID_CHANGES in fields:
            last, changed = int(fields[XID]), fields[XID_CHANGES]
            xids = (last,) if last and changed > 0 else ()
        ecc = int(fields[ECC_DBE]) if ECC_DBE in fields else gpu.ecc_uncorrected
        remap = fields[REMAP_PENDING] > 0 if REMAP_PENDING in fields else gpu.remapped_rows_pending
        retired = fields[RETIRED_PENDING] > 0 if RETIRED_PENDING in fields else gpu.retired_pages_pending
        out.append(
            replace(gpu, xids=xids, ecc_uncorrected=ecc, remapped_rows_pending=remap, retired_pages_pending=retired)
        )
    return out
