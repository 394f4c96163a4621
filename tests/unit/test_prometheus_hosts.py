"""Hosts read from Prometheus, without a network: the `[[hosts]]` config forms (the engine side's, strictly
validated), the instance matching by host part, and the pure mapping of exporter series to readings."""

from __future__ import annotations

import json
import re

import pytest

from poolconsole.collect.prometheus.api import Series
from poolconsole.collect.prometheus.discovery import hosts_from_targets, instance_host
from poolconsole.collect.prometheus.exporters import dcgm_gpus, nvidia_smi_gpus
from poolconsole.collect.prometheus.host_queries import (
    address_key,
    addresses_matcher,
    host_matchers,
    instance_address,
    instance_pattern,
)
from poolconsole.config import ConfigError, parse_config
from poolconsole.config.models import Host

PROM = '[prometheus]\nurl = "http://prom:9090"\n'


def problems(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    return str(caught.value)


def test_read_prometheus_on_a_host_mirrors_the_engine_form() -> None:
    config = parse_config(
        PROM + '[[hosts]]\nname = "a"\naddress = "gpu-box"\nuser = "ops"\nread = "prometheus"\n'
        'selector = \'{job=~"node|dcgm", instance=~"gpu-box:.*"}\'\n'
    )
    [host] = config.hosts
    assert (host.read, host.user, host.selector) == ("prometheus", "ops", '{job=~"node|dcgm", instance=~"gpu-box:.*"}')
    assert parse_config('[[hosts]]\nname = "b"\naddress = "b"\n').hosts[0].read == "direct"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[[hosts]]\nname = "a"\naddress = "a"\nread = "prometheus"\n', "needs a [prometheus] table"),
        (PROM + '[[hosts]]\nname = "a"\naddress = "a"\nread = "prometheus"\nlocal = true\n', "pick one"),
        (PROM + '[[hosts]]\nname = "a"\naddress = "a"\nselector = \'{job="node"}\'\n', "selector is only read"),
        (PROM + '[[hosts]]\nname = "a"\naddress = "a"\nread = "prometheus"\nselector = \'job="x"\'\n', "in braces"),
        (
            PROM + '[[hosts]]\nname = "a"\naddress = "a"\nread = "prometheus"\nselector = \'{__name__="up"}\'\n',
            "__name__",
        ),
        (PROM + '[[hosts]]\nname = "a"\naddress = "a"\nread = "ssh"\n', "read"),
        (PROM + '[[hosts]]\nname = "a"\naddress = "a"\nread = "prometheus"\nselectr = "{}"\n', "selectr"),
    ],
)
def test_host_config_problems_are_errors(text: str, said: str) -> None:
    assert said in problems(text)


def test_the_default_match_is_the_instance_host_with_any_port() -> None:
    pattern = instance_pattern("gpu-box.tail.ts.net")
    assert all(re.fullmatch(pattern, i) for i in ("gpu-box.tail.ts.net:9100", "gpu-box.tail.ts.net"))
    assert not any(re.fullmatch(pattern, i) for i in ("gpu-boxxtail.ts.net:9100", "gpu-box.tail.ts.net.x:1"))
    assert re.fullmatch(instance_pattern("fd7a::1"), "[fd7a::1]:9400")
    host = Host(name="a", address="gpu-box", read="prometheus")
    assert host_matchers(host) == 'instance=~"gpu\\\\-box(:[0-9]+)?"'  # a PromQL string of the RE2 pattern
    assert instance_host("[fd7a::1]:9400") == "fd7a::1" and instance_host("gpu-box:9100") == "gpu-box"


def series(metric: str, value: float, /, **labels: str) -> Series:
    return Series.of({"__name__": metric, **labels}, value, 0.0)


def test_dcgm_mig_instances_sum_their_framebuffer_and_missing_fields_stay_unknown() -> None:
    mig = {"gpu": "0", "UUID": "GPU-x", "modelName": "NVIDIA H100 80GB HBM3"}
    gpus, notes, _ = dcgm_gpus(
        [
            series("DCGM_FI_DEV_FB_USED", 100, GPU_I_ID="7", **mig),
            series("DCGM_FI_DEV_FB_USED", 50, GPU_I_ID="8", **mig),
            series("DCGM_FI_DEV_FB_FREE", 9000, GPU_I_ID="7", **mig),
            series("DCGM_FI_DEV_FB_FREE", 9050, GPU_I_ID="8", **mig),
        ]
    )
    [gpu] = gpus
    assert (gpu.memory_used_bytes, gpu.memory_free_bytes) == (150 * 2**20, 18050 * 2**20)
    assert gpu.utilization_pct is None and gpu.power_w is None and gpu.temperature_c is None
    assert any("MIG" in n for n in notes)


def test_nvidia_gpu_exporter_uuid_gets_its_prefix_back_and_na_memory_is_none() -> None:
    gpus, _ = nvidia_smi_gpus(
        [
            series("nvidia_smi_gpu_info", 1, uuid="abc", index="3", name="NVIDIA GB10"),
            series("nvidia_smi_utilization_gpu_ratio", 0.25, uuid="abc"),
        ]
    )
    [gpu] = gpus
    assert (gpu.index, gpu.uuid, gpu.utilization_pct) == (3, "GPU-abc", 25.0)
    assert gpu.memory_total_bytes is None and gpu.memory_used_bytes is None


def test_discovered_hosts_group_exporters_by_instance_host() -> None:
    hosts = hosts_from_targets(
        [
            ("node_exporter", "node", "gpu-box:9100"),
            ("DCGM exporter", "dcgm", "gpu-box:9400"),
            ("node_exporter", "node", "spark:9100"),
        ]
    )
    assert [(h.name, h.address, h.read) for h in hosts] == [
        ("gpu-box", "gpu-box", "prometheus"),
        ("spark", "spark", "prometheus"),
    ]
    assert "gpu-box:9400" in (hosts[0].description or "")


ADDRESSES = ("gpu-box", "gpu-box.tail.ts.net", "h0001", "fd7a::1", "[fd7a::2]", "10.0.0.5")
INSTANCES = (
    "gpu-box:9100",
    "gpu-box",
    "gpu-box:",
    "gpu-box:91a",
    "gpu-boxx:9100",
    "gpu-box.tail.ts.net:9400",
    "gpu-box.tail.ts.net.x:1",
    "h0001:9835",
    "[fd7a::1]:9400",
    "[fd7a::1]",
    "fd7a::1",
    "[fd7a::2]:1",
    "10.0.0.5:9100",
    "10.0.0.5x",
    "[gpu-box]:9100",
    "",
)


def test_a_batch_slices_by_the_address_each_hosts_own_pattern_matches() -> None:
    """One batched query reads every address's instances in one pattern and gives each series to the host
    whose own instance_pattern matches it: the same series as the host's own query, no more, no fewer."""
    keys = {address_key(a) for a in ADDRESSES}
    together = json.loads(addresses_matcher(keys).removeprefix("instance=~"))  # the PromQL string's pattern
    for instance in INSTANCES:
        own = {address_key(a) for a in ADDRESSES if re.fullmatch(instance_pattern(a), instance)}
        sliced = instance_address(instance)
        assert ({sliced} & keys) == own, instance
        assert bool(re.fullmatch(together, instance)) == bool(own), instance
