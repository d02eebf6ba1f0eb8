"""Fake DSA metadata parameters (shape of upstream sparse/dsa/params.py, era C)."""
from dataclasses import dataclass
from typing import Optional


@dataclass
class DSAMetadataParams:
    index_topk: int
    indexer_max_chunk_size: Optional[int] = None
