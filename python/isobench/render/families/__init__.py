"""One module per benchmark family: its section as text, Markdown and
plots, built from the kit (render/kit/).  A family imports the kit, never
a page (tests/python/test_layers.py)."""
