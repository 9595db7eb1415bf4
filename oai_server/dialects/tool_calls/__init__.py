"""Tool calls: how `tools` and `tool_choice` are served (`plan`), shown to a model whose
template does not (`prompt`), and read back from its text as it streams (`parsers`).
"""
