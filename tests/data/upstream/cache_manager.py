"""Fake DSA cache manager module: C++-backed upstream, so never executed by regress check."""
from tensorrt_llm.bindings.internal.batch_manager import KVCacheManagerCpp


def is_dsa_cache_manager(manager):
    return isinstance(manager, KVCacheManagerCpp)
