"""Numbers as an operator reads them: a p50/p95 pair in one unit, the larger's, and unknown as n/a."""

from __future__ import annotations

from poolconsole.model.units import seconds_pair


def test_a_pair_of_durations_reads_in_one_unit_and_never_0_for_unknown() -> None:
    assert seconds_pair(0.0915, 0.1315) == "92/132 ms"
    assert seconds_pair(0.09, 1.2134) == "0.09/1.21 s"
    assert seconds_pair(5.5255, 10.1052) == "5.53/10.11 s"  # was "5525.5/10105.2 ms", cut to "5525.5/101"
    assert seconds_pair(None, 0.25) == "n/a / 250 ms"  # the ledger had said "0.00/0.25 s"
    assert seconds_pair(None, None) == "n/a / n/a"
    assert seconds_pair(0.004, 1.3) == "0.004/1.30 s"  # a known value never reads 0
    assert seconds_pair(0.0004, 0.2) == "0.4/200 ms" and seconds_pair(0.0, 0.2) == "0/200 ms"
