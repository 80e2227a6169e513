"""isobench: what isolation costs, measured with one harness on one machine.

The measuring happens in C (``build/isob``, the native driver).  This package
only starts that driver, stores what it prints (one SQLite file), computes
statistics, checks the run's soundness, and prints tables, reports and exports.

Modules, in the order data flows through them:

    driver   find ``isob``, ask it what it has (``list``, ``isolation``, ``--version``)
    proc     run one child process in its own process group with a time-out
    runner   one ``isob`` invocation per (benchmark, mechanism); failures become records
    records  the JSON-lines protocol of ``isob`` and the immutable Result record
    store    the SQLite store (runs, results, raw samples)
    sysinfo  the machine a run came from
    analysis a stored run loaded and grouped into configurations with baselines
    stats    summary statistics, order-statistic and t intervals, modes, quantization
    units    ratios and unit conversion: the one place numbers change scale
    summary  THE summary document of a run: headlines, intervals, ratios, findings
    checks   soundness checks with severities (`isobench check`, and every report)
    compare  two runs' summary documents, each normalized to its own direct baseline
    reference published figures (data/reference.csv), shown beside local ones
    plots    the report's plots (matplotlib, Agg), drawn from the summary document
    report   HTML report, plots and Markdown summary, rendered from the summary document
    system   show, tune and reset the machine state that matters to measuring
    table    plain-text tables
    export   CSV and JSON exports of a stored run
    cli      the ``isobench`` command
"""

__version__ = "0.1.0"
