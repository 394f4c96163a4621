"""GPU health from the DCGM exporter read through Prometheus (issue 37): an /api/v1/query answer in
Prometheus' format with the exporter's labels, parsed as the host reading parses it, gives gpu_xid and gpu_ecc
the fields the SSH path gives them: an Xid whose value changed in the last 5 minutes is recent, one that only
stays at its last value is not, uncorrected ECC errors and a pending remap or retirement count, a field not
exported stays unknown; the rules then fire on them."""

from __future__ import annotations

import json

from poolconsole.collect import dcgm_health
from poolconsole.collect.prometheus.api import parse_vector
from poolconsole.config.models import AlertSettings
from poolconsole.model.alerts import Alerts
from poolconsole.model.hosts import GpuReading, HostSnapshot, HostState

LABELS = {"instance": "gpu-box:9400", "job": "dcgm", "modelName": "NVIDIA H200", "Hostname": "gpu-box",
          "DCGM_FI_DRIVER_VERSION": "570.124.06", "device": "nvidia{gpu}", "UUID": "GPU-{gpu}a1b2"}  # fmt: skip


def answer(rows: list[tuple[str, int, float]]) -> bytes:
    result: list[dict[str, object]] = []
    for name, gpu, value in rows:
        metric = {"__name__": name, "gpu": str(gpu), **{k: v.format(gpu=gpu) for k, v in LABELS.items()}}
        result.append({"metric": metric, "value": [1765000000.123, str(value)]})
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


def test_recent_xids_and_uncorrected_ecc_from_dcgm_series() -> None:
    series = parse_vector(
        answer(
            [
                ("DCGM_FI_DEV_XID_ERRORS", 0, 79),  # a new Xid 79
                (dcgm_health.XID_CHANGES, 0, 1),
                ("DCGM_FI_DEV_XID_ERRORS", 1, 13),  # Xid 13 an hour ago: the value stays, nothing changed
                (dcgm_health.XID_CHANGES, 1, 0),
                ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0, 0),
                ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1, 2),
                ("DCGM_FI_DEV_ROW_REMAP_PENDING", 1, 1),
                ("DCGM_FI_DEV_XID_ERRORS", 2, 0),  # no changes series: unknown
                ("DCGM_FI_DEV_GPU_TEMP", 2, 40),
            ]
        )
    )
    gpus = [GpuReading(i, "NVIDIA H200", None, None, None, None, None, None, None) for i in range(4)]
    read = dcgm_health.with_health(gpus, series)
    assert [g.xids for g in read] == [(79,), (), None, None]
    assert [g.ecc_uncorrected for g in read] == [0, 2, None, None]
    assert [g.remapped_rows_pending for g in read] == [None, True, None, None]
    assert read[3] == gpus[3]

    alerts = Alerts(AlertSettings())
    snap = HostSnapshot("gpu-box", "gpu-box", HostState.OK, gpus=tuple(read), fetched_at=100.0)
    fired = {(e.rule, e.fired) for e in alerts.host(snap, 100.0)}
    assert ("gpu_xid_gpu0", True) in fired and ("gpu_ecc_gpu1", True) in fired
    assert not any(rule.endswith(("gpu1", "gpu2")) and rule.startswith("gpu_xid") for rule, _ in fired)


def test_the_query_term_names_the_changes() -> None:
    term = dcgm_health.xid_changes('instance=~"gpu-box(:[0-9]+)?"')
    assert term == (
        'label_replace(label_replace(changes(DCGM_FI_DEV_XID_ERRORS{instance=~"gpu-box(:[0-9]+)?"}[5m]), '
        '"__name__", "poolconsole_dcgm_xid_changes_5m", "", ""), "poolconsole_term", "xid_changes", "", "")'
    )
