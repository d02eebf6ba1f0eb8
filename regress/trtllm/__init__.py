"""The TensorRT-LLM-facing side of regress: layouts, requirements, LLM configs, hooks, runs."""

# Nothing here imports ``tensorrt_llm`` at import time; every module can be used (and is unit-tested)
# on a machine without it, and the functions that need it import it lazily.
