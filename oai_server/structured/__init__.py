"""Structured output: the JSON Schemas a request may hand to the grammar compiler."""
