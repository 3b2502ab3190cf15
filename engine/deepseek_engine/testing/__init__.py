"""Fixture writers (tiny random checkpoints) for the tests, examples and benchmarks; the engine never imports this."""
