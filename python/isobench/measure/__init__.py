"""Measuring: the native driver, the runner and a run's life, the machine and its state, the servers."""
