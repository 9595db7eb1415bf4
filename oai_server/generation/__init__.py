"""Generation parameters and their conversion: chat templates, sampling options,
logprobs, and the engine request that a service drives."""
