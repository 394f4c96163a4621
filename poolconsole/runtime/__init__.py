"""The headless pool runtime: poll loops, pool state, alerts, the history store, subscribers."""
