# Package __init__ of the fake tree: like upstream's, it needs compiled code that a CPU box lacks.
from tensorrt_llm.bindings import _compiled_bindings  # noqa: F401
