"""What one request looked like from the client's side: the timings every metric comes from.

All times are `time.perf_counter()` seconds, so only differences between them mean anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Error kinds, as counted in a run's metrics. HTTP errors are "http_<status>".
TIMEOUT = "timeout"
CONNECTION = "connection"
STREAM_ERROR = "stream_error"  # an error event or error object inside a 200 stream
INCOMPLETE = "incomplete"  # the stream ended without its final "[DONE]"
PROTOCOL = "protocol"  # a chunk that is not valid JSON
ENGINE_ERROR = "engine_error"  # an exception from the engine, when measuring it in-process


def http_error(status: int) -> str:
    """The error kind of an HTTP response with a non-2xx status."""
    return f"http_{status}"


@dataclass
class RequestRecord:
    """Timings and token counts of one request.

    `chunk_times[i]` is when the i-th chunk carrying generated text arrived and `chunk_tokens[i]`
    how many tokens it carried (from the server's per-chunk usage when reported, else 1).
    """

    send_time: float
    end_time: float = 0.0
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    prompt_tokens: int | None = None  # from the server's usage, when reported
    completion_tokens: int | None = None  # the final usage.completion_tokens, when reported
    error: str | None = None
    error_detail: str = ""
    # What the client asked for: the prompt length when its tokenizer is known, and the output
    # length when the server was told to ignore end-of-sequence.
    expected_prompt_tokens: int | None = None
    expected_output_tokens: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def input_tokens(self) -> int | None:
        """Prompt tokens: the server's count when reported, else the client's."""
        return self.prompt_tokens if self.prompt_tokens is not None else self.expected_prompt_tokens

    @property
    def output_tokens(self) -> int:
        """Tokens generated: the server's final count when reported, else those seen in chunks."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        return sum(self.chunk_tokens)
