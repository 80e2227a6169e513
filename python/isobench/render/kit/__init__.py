"""The render floor: table formatters and text folding (table), the plots'
look and saving (plots), the blocks a family section is written in
(blocks), claim verdicts (claims) and the report folder's bookkeeping
(reportdir).  A kit module imports no family and no page
(tests/python/test_layers.py)."""
