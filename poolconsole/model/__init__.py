"""Snapshots, derived rates, history and pool state. Never imports Textual."""
