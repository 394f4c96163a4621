"""`runs --compare` and `smoke --compare` say a stored figure in the console's units."""

from poolconsole.model.smoke import figure_words


def test_figures_in_the_tables_units() -> None:
    assert figure_words("ttft_p50", 0.11472665650316571) == "114.7 ms"
    assert figure_words("itl_p95", 0.0547767389394096) == "54.78 ms"
    assert figure_words("tps_aggregate", 812.345) == "812.3 tok/s"
    assert figure_words("passed", True) == "passed" and figure_words("passed", False) == "FAILED"
    assert figure_words("ttft_p95", None) == "n/a"
