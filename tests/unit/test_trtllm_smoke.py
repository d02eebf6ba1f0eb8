"""The checkpoint-free smoke run against a fake LLM: arguments, sampling and shutdown."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from regress.trtllm.llm_config import build_spec
from regress.trtllm.smoke import dummy_prompts, run_smoke

LLMAPI = SimpleNamespace(
    MTPDecodingConfig=lambda **kw: ("mtp", kw),
    CudaGraphConfig=lambda **kw: ("graph", kw),
    KvCacheConfig=lambda **kw: ("kv", kw),
    MoeConfig=lambda **kw: ("moe", kw),
)


class FakeLLM:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.closed = False
        self.fail = kwargs.get("fail", False)

    def generate(self, prompts, sampling_params):
        if self.fail:
            raise RuntimeError("CUDA error")
        self.prompts, self.sampling = prompts, sampling_params
        n = sampling_params["max_tokens"]
        return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[7] * n)]) for _ in prompts]

    def shutdown(self):
        self.closed = True


def sampling(**kwargs):
    return kwargs


@pytest.fixture
def built():
    """An LLM factory that remembers what it built."""
    instances = []

    def factory(**kwargs):
        instances.append(FakeLLM(**kwargs))
        return instances[-1]

    factory.instances = instances
    return factory


@pytest.fixture
def spec():
    return build_spec(
        "/tmp/tiny",
        batch_size=8,
        max_draft_len=4,
        cuda_graph=True,
        load_format="dummy",
        skip_tokenizer_init=True,
    )


def test_dummy_prompts_are_deterministic_varied_and_in_vocabulary():
    prompts = dummy_prompts(16, 100, seed=3)
    assert prompts == dummy_prompts(16, 100, seed=3)
    assert prompts != dummy_prompts(16, 100, seed=4)
    assert len({len(p) for p in prompts}) > 4
    assert all(2 <= t < 100 for p in prompts for t in p)


def test_smoke_run_generates_every_prompt_and_shuts_down(spec, built):
    prompts = dummy_prompts(16, 1000, seed=0)
    result = run_smoke(
        spec,
        prompts,
        max_new_tokens=32,
        llm_factory=built,
        sampling_factory=sampling,
        llmapi=LLMAPI,
    )
    llm = built.instances[-1]
    assert result.requests == 16 and result.output_lengths == [32] * 16
    assert llm.closed
    assert llm.kwargs["load_format"] == "dummy" and llm.kwargs["skip_tokenizer_init"] is True
    assert llm.kwargs["max_batch_size"] == 8
    assert llm.kwargs["speculative_config"] == (
        "mtp",
        {"max_draft_len": 4, "mtp_eagle_one_model": True},
    )
    # No tokenizer: an explicit end id that never fires, and no detokenisation.
    assert llm.sampling == {"max_tokens": 32, "end_id": -1, "pad_id": -1, "detokenize": False}
    assert llm.prompts == [list(p) for p in prompts]


def test_engine_is_shut_down_when_generation_fails(built):
    failing = build_spec(
        "/tmp/tiny", batch_size=8, max_draft_len=4, cuda_graph=False, extra={"fail": True}
    )
    with pytest.raises(RuntimeError, match="CUDA error"):
        run_smoke(
            failing,
            [[5, 6]],
            max_new_tokens=4,
            llm_factory=built,
            sampling_factory=sampling,
            llmapi=LLMAPI,
        )
    assert built.instances[-1].closed
