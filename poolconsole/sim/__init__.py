"""The simulated pool of `poolconsole demo`."""
