"""Knowledge of a TensorRT-LLM source tree: its era (``layout``) and its DSA classes and maps (``maps``)."""
