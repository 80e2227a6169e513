"""One module per benchmark family: its section of the summary document,
built from the kit (analysis/kit/).  A family imports the kit, never a
page (tests/python/test_layers.py)."""
