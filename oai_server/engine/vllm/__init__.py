"""The vLLM adapter: the one place that imports `vllm`.

`engine` (chat and completions over `AsyncLLM`) and `pooling` (embeddings) implement the
interface of `oai_server.engine`; `args` turns engine settings into vLLM's engine arguments,
`holder` owns the engine client and its processes, `cpu` plans the CPU kernels and the
allocator, `lora` and `lora_ops` serve LoRA adapters (and fix vLLM's CPU LoRA ops). vLLM
itself is imported lazily, inside the functions that start or call an engine.
"""
