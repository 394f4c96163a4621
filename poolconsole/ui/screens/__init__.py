"""Screens of the console, each with a sibling .tcss."""
