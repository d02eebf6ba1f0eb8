"""regress: CI regression suite and bisect toolkit for speculative decoding on DSA models."""

__version__ = "0.1.0"
