"""Fake modules shared by the TensorRT-LLM unit tests."""

# Source of a stand-in for regress.dsa.sentinel: a violation whenever a metadata object is stale.
FAKE_SENTINEL_MODULE = """
class Sentinel:
    def __init__(self):
        self.violations = []

    def attach(self, metadata):
        inner = metadata.prepare

        def prepare():
            inner()
            if metadata.stale:
                self.violations.append({"check": "req_idx_map", "message": "stale map"})

        metadata.prepare = prepare
"""
