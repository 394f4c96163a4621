"""Smoke tests and quick benchmarks against the OpenAI APIs."""
