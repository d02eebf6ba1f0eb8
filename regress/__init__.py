"""regress: CI regression suite and bisect toolkit for speculative decoding on DSA models."""

__version__ = "0.1.0"

#: The name pip knows this project by. ``regress`` on PyPI is another project (Python bindings to
#: Rust's ECMA regex engine, which installs a top-level ``regress`` module too), so ours is
#: distributed as ``trtllm-regress``; the import package and the console script stay ``regress``.
DISTRIBUTION = "trtllm-regress"
