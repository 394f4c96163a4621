"""What the hosts read from a Prometheus query API are asked (prometheus.hosts reads the answers): a host's
series and `up`, its targets' scrape times and the exporters lately there, by its address or its selector;
a batch asks them of many hosts in one instant query (their addresses in one matcher)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from poolconsole.collect import dcgm_health
from poolconsole.collect.prometheus.api import quoted
from poolconsole.collect.prometheus.exporters import DCGM_NAMES, MARKERS, NODE_NAMES, NVSMI_NAMES
from poolconsole.collect.prometheus.queries import SCRAPE_OF
from poolconsole.config.models import Host

RECENT = "10m"
"""How far back a target that carried exporter series still counts as that exporter once it is down."""


def instance_pattern(address: str) -> str:
    """An RE2 pattern for `instance` labels of `address` with any port (IPv6 in brackets)."""
    bare = address.strip("[]")
    if ":" in bare:
        return rf"\[{re.escape(bare)}\](:[0-9]+)?"
    return rf"{re.escape(bare)}(:[0-9]+)?"


def host_matchers(host: Host) -> str:
    """The host's label matchers without braces: its selector's, else every instance at its address."""
    if host.selector is not None:
        return host.selector.strip()[1:-1].strip().rstrip(",").strip()
    return f"instance=~{quoted(instance_pattern(host.address))}"


def host_selection(host: Host) -> str:
    """Every series the host reading uses, and each target's `up` (one host's own query; a batch holds it)."""
    return selection_of(host_matchers(host))


def selection_of(sel: str) -> str:
    names = "|".join(sorted({*NODE_NAMES, *DCGM_NAMES, *NVSMI_NAMES, "up"}))
    return f'{{__name__=~"{names}", {sel}}}'


def host_scrape_times(host: Host) -> str:
    return scrape_times_of(host_matchers(host))


STAMPED = ("up", *(name for names in MARKERS.values() for name in names))
"""The families whose samples' times are a target's scrape time: its `up`, or, where Prometheus has none for it
(its series come through an aggregating exporter or a federation, with `honor_labels`), its exporter series'."""


def scrape_times_of(sel: str) -> str:
    """Each target's scrape time under `sel`, by (job, instance). One timestamp() a family (it drops the
    name, and two families' series of one target would then be one label set twice)."""
    terms = " or ".join(f"timestamp({name}{{{sel}}})" for name in STAMPED)
    return f"max by (job, instance) ({terms})"


def recent_exporters(host: Host) -> str:
    """(job, instance, exporter) of each target there that carried exporter series lately, even if down now."""
    return recent_of(host_matchers(host))


def recent_of(sel: str) -> str:
    terms = [
        f'label_replace(group by (job, instance) (last_over_time({name}{{{sel}}}[{RECENT}])), "exporter", '
        f'{quoted(exporter)}, "", "")'
        for exporter, names in MARKERS.items()
        for name in names
    ]
    return " or ".join(terms)


BATCH_HOST_CHARS = 300
"""Characters of host addresses in one batched query: its instance pattern appears eight times (the raw
series, the scrape times, six exporter markers), so 300 keep the URL under 7.2 KB (the 8 KB request line
a proxy in front of the query API commonly allows): 10 hosts named gpu-node-NN.tail1234.ts.net a query
(7.1 KB), 50 named h0001 (5.5 KB)."""


def address_key(address: str) -> str:
    """A host's address as instance_pattern reads it (IPv6 without its brackets)."""
    return address.strip("[]")


@lru_cache(maxsize=8192)
def instance_address(instance: str) -> str | None:
    """The address_key whose instance_pattern matches this `instance` label: gpu-box of gpu-box:9100 or
    gpu-box, fd7a::1 of [fd7a::1]:9400 (an IPv6 address only in brackets); None when none does. Kept by
    label: every series of every host's answer asks it each tick (250 hosts: a few thousand a tick)."""
    found = re.fullmatch(r"\[([^\]]*:[^\]]*)\](?::[0-9]+)?|([^:]*)(?::[0-9]+)?", instance)
    if found is None:
        return None
    return found.group(1) if found.group(1) is not None else found.group(2)


def addresses_matcher(addresses: Iterable[str]) -> str:
    """One instance=~ matcher for what each address's instance_pattern matches (its address_key)."""
    plain = sorted({a for a in addresses if ":" not in a})
    ipv6 = sorted({a for a in addresses if ":" in a})
    alternatives = []
    if plain:
        alternatives.append(f"({'|'.join(re.escape(a) for a in plain)})(:[0-9]+)?")
    if ipv6:
        alternatives.append(rf"\[({'|'.join(re.escape(a) for a in ipv6)})\](:[0-9]+)?")
    return f"instance=~{quoted('|'.join(alternatives))}"


def batch_expression(sel: str) -> str:
    """The three vectors of every host under the matchers `sel` in one instant query: the raw series (and
    `up`) `or` the scrape times, tagged with SCRAPE_OF (timestamp() drops the name, and `or` matches label
    sets without it) `or` the recent exporters (told apart by their `exporter` label) `or` the DCGM exporter's Xid
    changes in the last 5 minutes (collect.dcgm_health, for gpu_xid)."""
    return f"{selection_of(sel)} or {stamps_of(sel)} or {recent_of(sel)} or {dcgm_health.xid_changes(sel)}"


def stamps_of(sel: str) -> str:
    """The scrape times of the targets under `sel`, tagged (batch_expression's part, and what a batch asks
    first once its hosts hold readings)."""
    return f'label_replace({scrape_times_of(sel)}, "{SCRAPE_OF}", "up", "", "")'
