"""Analysis: a stored run loaded and grouped (runs), its statistics, headline
numbers and findings, gathered into one summary document per run."""
