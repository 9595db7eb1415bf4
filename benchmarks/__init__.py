"""A load-test harness for any OpenAI-compatible chat/completions endpoint.

Run it as ``python -m benchmarks``; ``python -m benchmarks --help`` lists the subcommands.
"""
