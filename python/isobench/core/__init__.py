"""The bottom layer: what every stage shares, and nothing of any stage.

Data flows one way (docs/design.md, "One way through"): isob's JSON lines
-> measure/ -> store/ -> analysis/ -> render/, with cli/ on top.  What
more than one stage needs lives here, below them all, and imports no stage:

    records    the data model: isob's JSON-lines protocol, Header, Result,
               statuses, NO_MECHANISM, REFERENCES, PRIMARY_EVENT, freeze/thaw,
               and a run's identifying columns in flat tables (RUN_COLUMNS)
    benchmarks one record per benchmark: its kind, output params, the run
               options it reads, repetitions, time-out, headline phase,
               baseline rule, sections and the help of its own options
    stats      pure statistics over samples and repetitions
    owner      which process owns a running run, and whether it still exists
    validate   validation at the edge: option values, and the names and
               params a stored or imported run may hold
    attackers  the isolation matrix's data model: attackers, cell verdicts,
               the cells of an isolation line and the one-word summary
    text       the one plain text-table function, WIDTH and wrap (measure's
               own commands print with them; render/kit/table.py builds on them)

Tables of results, units on screen and every other rendering belong to
render/.  errors.py and the package's __version__ sit in this layer too.
tests/python/test_layers.py checks that nothing here imports a stage.
"""
