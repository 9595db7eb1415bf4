"""oai-server: an OpenAI-compatible chat and completions server on vLLM."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("oai-server")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"
