"""The analysis floor: what every family and page shares -- a stored run
loaded and grouped (runs), quantities and their units, ratios, averages,
fits, tails, CPU time, claims and published figures.  A kit module imports
no family and no page (tests/python/test_layers.py)."""
