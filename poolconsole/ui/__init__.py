"""The Textual console. Only this package imports Textual; it reads the model and draws."""
