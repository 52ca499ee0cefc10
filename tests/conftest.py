"""Suite-wide checks."""

from __future__ import annotations

import gc

import pytest

# the shared helpers in tests/train/support check with plain asserts: rewrite them like the tests' own, so a
# failure shows its values (they are imported by module name once tests/train/conftest.py puts them on the path)
pytest.register_assert_rewrite("chat_families", "policy_versions", "token_path", "train_helpers", "vllm_standin")


@pytest.fixture(scope="session", autouse=True)
def no_sciworld_jvm_left_running():
    """After the tests (per xdist worker), no ScienceWorld JVM started by this process may still run.

    Envs that were closed or became unreachable must have ended their JVMs; `gc.collect()` first
    finalizes the unreachable ones. (That no JVM outlives the process itself is tested in
    `tests/envs/sciworld/test_sciworld.py`.)
    """
    yield
    from agentgym_envs.sciworld.backend import live_jvms

    gc.collect()
    assert not live_jvms(), f"ScienceWorld JVMs still running after the tests: pids {live_jvms()}"
