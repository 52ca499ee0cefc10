"""The batched hot path's shortcuts give what the general code gives: the vector client's request bytes,
its batched infos, `wire.dumps`, and the server's replies written in one piece."""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import numpy as np
import pytest

from agentgym_envs.remote import RemoteVectorEnv, wire
from agentgym_envs.remote.client import env as client_env
from agentgym_envs.remote.client.transport import HTTPTransport
from agentgym_envs.remote.client.vector import stack_any_infos, stack_infos
from agentgym_envs.timeouts import _CoalescingTransport

ODD_TEXTS = ["inventory", "", "é", "\ud800", 'a"b\\c\n\t\x00', "🙂", "\u2028", "x" * 300]


def _same(a: Any, b: Any) -> None:
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            _same(a[key], b[key])
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, (a, b)
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            assert type(x) is type(y) and (x == y or (x != x and y != y)), (a, b)
    else:
        assert a == b


def _value(rng: random.Random, depth: int = 0) -> Any:
    if depth < 2 and rng.random() < 0.1:
        return {key: _value(rng, depth + 1) for key in rng.sample("abc", rng.randint(0, 3))}
    return rng.choice(
        [
            lambda: rng.randint(-5, 5),
            lambda: rng.random(),
            lambda: rng.random() < 0.5,
            lambda: None,
            lambda: rng.choice(ODD_TEXTS),
            lambda: [1, 2],
            lambda: (1,),
            lambda: np.int32(3),
            lambda: np.float32(1.5),
        ]
    )()


def test_stack_infos_shortcut_matches_the_general_batching() -> None:
    rng = random.Random(0)
    for _ in range(3000):
        n = rng.randint(1, 5)
        keys = rng.sample("pqrstu", rng.randint(0, 4))
        if rng.random() < 0.5:  # the common case: the same keys, often the same types
            kind = rng.choice(["int", "float", "bool", "str", "none", "any"])
            make = {
                "int": lambda: rng.randint(0, 9),
                "float": lambda: rng.random(),
                "bool": lambda: rng.random() < 0.5,
                "str": lambda: rng.choice(ODD_TEXTS),
                "none": lambda: None,
                "any": lambda: _value(rng),
            }[kind]
            infos: list[dict[str, Any] | None] = [{key: make() for key in keys} for _ in range(n)]
        else:
            infos = [
                None if rng.random() < 0.2 else {key: _value(rng) for key in rng.sample("pqrstu", rng.randint(0, 4))}
                for _ in range(n)
            ]
        try:
            expected = stack_any_infos(infos)
        except Exception as error:  # e.g. a text after a float (no float array holds it), a list beside a dict
            with pytest.raises(type(error)):
                stack_infos(infos)
            continue
        _same(stack_infos(infos), expected)


def test_stack_infos_masks_are_separate_arrays() -> None:
    out = stack_infos([{"a": 1, "b": 2}, {"a": 3, "b": 4}])
    out["_a"][0] = False
    assert out["_b"].all()


def _fake_vector_env(n: int, replies: list[bytes]) -> tuple[RemoteVectorEnv, list[bytes]]:
    """A vector env of `n` sub-envs on a socket that answers `replies` in turn and records what was sent."""
    sent: list[bytes] = []

    class Socket:
        def sendall(self, data: bytes) -> None:
            sent.append(data)

        def recv(self, size: int) -> bytes:
            body = replies.pop(0)
            return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)

        def close(self) -> None:
            pass

    transport = HTTPTransport("http://127.0.0.1:1", retries=0)
    transport._sock = Socket()  # type: ignore[assignment]
    envs = RemoteVectorEnv(n, "http://127.0.0.1:1", "AgentGym/TextCraft-v0", retries=0)
    subs = []
    for i in range(n):
        sub = client_env.RemoteEnv("http://127.0.0.1:1", "AgentGym/TextCraft-v0", transport=transport)
        sub.session_id, sub._description, sub._started = ["a1b2", 'q"uote', "\ud800id", "é"][i % 4] + str(i), {}, True
        subs.append(sub)
    envs.envs, envs._first, envs._connected = subs, subs[0], True
    envs._connect = lambda: transport  # type: ignore[method-assign]
    return envs, sent


def test_vector_step_sends_the_bytes_wire_dumps_gives() -> None:
    n = 4
    step = {"ok": True, "observation": "o", "reward": 0.5, "terminated": True, "truncated": False, "info": {"k": 1}}
    reset = {"ok": True, "observation": "r", "info": {"k": 2}}
    first = wire.dumps({"results": [step] * n})
    second = wire.dumps({"results": [reset] * n})
    envs, sent = _fake_vector_env(n, [first, second])
    for actions in (ODD_TEXTS[:n], ODD_TEXTS[n : 2 * n]):
        seqs = [sub._seq + 1 for sub in envs.envs]
        resets = envs._autoreset.tolist()
        envs.step(actions)
        calls = [
            {"session_id": sub.session_id, "op": "reset", "seq": seq}
            if was_reset
            else {"session_id": sub.session_id, "op": "step", "action": action, "seq": seq}
            for sub, action, seq, was_reset in zip(envs.envs, actions, seqs, resets, strict=True)
        ]
        body = sent[-1].split(b"\r\n\r\n", 1)[1]
        assert body == wire.dumps({"calls": calls})
        assert json.loads(body) == {"calls": calls}
    assert resets == [True] * n  # the second turn reset every sub-env (all terminated in the first)


def test_vector_step_results_are_batched_as_before() -> None:
    steps = [
        {"ok": True, "observation": f"o{i}", "reward": 0.25 * i, "terminated": i == 1, "truncated": i == 2}
        | {"info": {"score": 0.5, "task_id": f"t{i}", "depth": i, "success": False, "available_actions": None}}
        for i in range(3)
    ]
    envs, _ = _fake_vector_env(3, [wire.dumps({"results": steps})])
    observations, rewards, terminations, truncations, infos = envs.step(["a", "b", "c"])
    assert observations == ("o0", "o1", "o2")
    assert rewards.dtype == np.float64 and rewards.tolist() == [0.0, 0.25, 0.5]
    assert terminations.dtype == np.bool_ and terminations.tolist() == [False, True, False]
    assert truncations.tolist() == [False, False, True]
    assert envs._autoreset.tolist() == [False, True, True]
    _same(infos, stack_any_infos([step["info"] for step in steps]))


def test_vector_step_raises_the_first_failed_call_and_applies_nothing() -> None:
    ok = {"ok": True, "observation": "o", "reward": 0.0, "terminated": False, "truncated": False, "info": {}}
    failed = {"ok": False, "status": 422, "detail": "bad action", "error_type": "ValueError"}
    envs, _ = _fake_vector_env(2, [wire.dumps({"results": [ok, failed]})])
    with pytest.raises(ValueError, match="bad action"):
        envs.step(["a", "b"])
    assert envs.envs[0]._observation is None


def test_dumps_gives_what_the_checked_encoder_gives() -> None:
    checked = json.JSONEncoder(separators=(",", ":"), default=wire._jsonable)
    rng = random.Random(1)
    payloads: list[Any] = [
        {"a": float("nan"), "b": [1, 2.5, None, True, float("inf"), -float("inf")], "c": ODD_TEXTS},
        {1: "int key", 2.5: "float key", None: "none key", False: "bool key"},
        {"numpy": np.float32(0.5), "array": np.arange(3), "set": {3, 1}, "bytes": b"\xff", "other": object},
        "a text",
        [1, {"x": 2}],
        {"big": 2**80, "nested": {"deep": [[[{"a": "é"}]]]}},
    ]
    payloads += [{str(k): _value(rng) for k in range(rng.randint(0, 6))} for _ in range(300)]
    for payload in payloads:
        assert wire.dumps(payload) == checked.encode(payload).encode()


def test_dumps_still_refuses_a_cycle() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(ValueError, match="Circular reference"):
        wire.dumps(cycle)
    looped: list[Any] = []
    looped.append({"list": looped})
    with pytest.raises(ValueError, match="Circular reference"):
        wire.dumps({"x": looped})


class _Recorder:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = self.aborted = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str) -> str:
        return f"info {name}"


def test_coalescing_transport_writes_once_in_order() -> None:
    async def main() -> None:
        real = _Recorder()
        transport = _CoalescingTransport(real, asyncio.get_running_loop())
        transport.write(b"head ")
        buffer = bytearray(b"body")
        transport.write(buffer)
        buffer[:] = b"XXXX"  # the caller may reuse its buffer
        transport.write(b"")
        assert real.writes == [] and transport.get_write_buffer_size() == 9
        transport.flush()
        assert real.writes == [b"head body"]
        transport.writelines([b"a", b"b"])
        await asyncio.sleep(0)  # the end of the loop's turn writes what is held
        assert real.writes == [b"head body", b"ab"]
        transport.write(b"last words")
        transport.close()
        assert real.writes[-1] == b"last words" and real.closed
        assert transport.get_extra_info("peername") == "info peername"  # the rest is the real transport's
        other = _Recorder()
        held = _CoalescingTransport(other, asyncio.get_running_loop())
        held.write(b"reply")
        held.abort()
        assert other.writes == [b"reply"] and other.aborted
        big = _Recorder()
        large = _CoalescingTransport(big, asyncio.get_running_loop())
        large.write(b"h")
        large.write(b"x" * _CoalescingTransport.HELD_BYTES)  # past the bound: written at once, in order
        assert big.writes == [b"h" + b"x" * _CoalescingTransport.HELD_BYTES] and large.get_write_buffer_size() == 0
        gone = _Recorder()
        late = _CoalescingTransport(gone, asyncio.get_running_loop())
        late.write(b"never")
        gone.closed = True  # the peer left before the loop's turn ended
        await asyncio.sleep(0)
        assert gone.writes == []

    asyncio.run(main())


def test_step_reply_gives_what_dumps_gives() -> None:
    rng = random.Random(2)
    odd_rewards = [0.0, -0.0, 1.0, 0.1, 1e16, 1e-300, float("nan"), float("inf"), -float("inf"), 2**60 + 0.5]
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    for _ in range(500):
        observation = rng.choice([*ODD_TEXTS, None, 3, ["a"], np.str_("numpy text")])
        reward = rng.choice([*odd_rewards, 1, np.float32(0.5), True])
        terminated, truncated = rng.choice([True, False, np.bool_(True), 0]), rng.choice([True, False])
        info = rng.choice([{str(k): _value(rng) for k in range(rng.randint(0, 6))}, None, [1, 2], {}])
        payload = {
            "observation": observation,
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "info": info,
        }
        assert wire.step_reply(observation, reward, terminated, truncated, info) == wire.dumps(payload)
    with pytest.raises(ValueError, match="Circular reference"):
        wire.step_reply("o", 0.0, False, False, cycle)
