"""Generation parameters and their conversion: chat templates, sampling options,
logprobs, the engine request that a service drives, and a chat request translated from
another API's request."""
