"""Reasoning: the model's thinking told apart from its answer by vLLM's reasoning parsers
(or, for a generic thinking model, the built-in `tags`), run in front of the tool-call
parser; `selection` chooses a model's."""
