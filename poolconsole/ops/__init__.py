"""Operator actions: smoke tests (and, later, restarts and rollovers). Never imports Textual."""
