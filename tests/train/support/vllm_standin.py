"""A STAND-IN for a vLLM server, for tests on machines where vLLM cannot run (no GPU here).

It serves, on loopback, the routes that TRL's `VLLMClient` calls in `vllm_mode="server"` with the
request and reply shapes vLLM's OpenAI-compatible server uses (`/health`, `/v1/models`,
`/server_info`, `/v1/completions` with token-id prompts, `return_token_ids` and
`return_tokens_as_token_ids` logprobs, `/reset_prefix_cache`), and generates with a transformers
copy of the model: plain autoregressive sampling, the sampled token's processed logprob (after the
temperature), stopping after a token of `stop_token_ids` or the model's EOS, which stays in
`token_ids` as vLLM keeps it, or (given the tokenizer) after the token that completes one of the
request's `stop` strings, which also stays in `token_ids` (vLLM trims only the text). Weight updates
travel over NCCL in TRL, which a CPU cannot run: tests replace `VLLMClient.init_communicator` and
`update_named_params` by `StandInVLLM.receive_weights`, which copies the streamed tensors into the
stand-in's model by name, so a test can still check that the weights the trainer pushed are the
ones that sample.

The weight-transfer routes are served too, as vLLM's server (`VLLM_SERVER_DEV_MODE=1`,
`--weight-transfer-config`) answers TRL's `VLLMClient`: `/get_world_size`, `/server_info` with a
`weight_transfer_config`, `/init_weight_transfer_engine` (the server joins the trainer's group as rank
`rank_offset` of `world_size`, rendezvous at `master_address:master_port`, the trainer rank 0),
`/start_weight_update`, `/update_weights` (receives one tensor per `names`/`dtype_names`/`shapes` entry,
in that order, broadcast from rank 0, and loads it by name), `/finish_weight_update`, `/pause` and
`/resume`. The group is **gloo over loopback, not NCCL**, and each tensor is broadcast on its own, not in
vLLM's packed buffers: `gloo_trainer_init` and `gloo_broadcast_producer` stand in for vLLM's
`nccl_common.trainer_init` and `packed_tensor.packed_nccl_broadcast_producer` on the trainer's side, and
`gloo_init_communicator` for `VLLMClient.init_communicator`, which refuses a device that is not CUDA;
TRL's own `update_named_params`, `weight_update`, `reset_prefix_cache` and `close_communicator` run
unchanged over them (`use_gloo_transfer`).

With `alphabet` (token ids), the server does not sample: each reply is `named_reply(prompt)`, a
sequence of `alphabet` tokens drawn from a hash of the prompt's ids and then the end token, so a test
can tell from a reply which prompt it answered (a reply crossed to another prompt is seen).

`StandInLLM` stands in for `vllm.LLM` in TRL's colocate mode, with exactly the interface TRL's
`VLLMGeneration` calls on it (`generate` with token-id prompts and `SamplingParams`, the outputs'
`prompt_token_ids`, `outputs[i].token_ids` and `.logprobs`, `reset_prefix_cache`,
`llm_engine.model_executor.driver_worker.model_runner.model.load_weights`, and sleep mode's
`sleep(level=1)` and `wake_up(tags=None)`); its replies are named as above. Under tensor parallelism
every rank of the group must call it with the same prompts and sampling parameters, as vLLM's external
launcher requires; the stand-in checks that (its group must be every process).

Sleep mode follows vLLM's executor: `sleep` puts both tags ("weights", "kv_cache") to sleep and is a
no-op when already asleep; `wake_up(tags)` wakes the tags named (all with None), and does nothing when
the engine is awake or a tag named is not asleep. Level 1 keeps the weights (offloaded), level 2
discards them until `load_weights` has put every one back (`weight_names`). Stricter than vLLM, which
would crash or sample from freed memory, the stand-in raises on `generate` while a tag sleeps or with
discarded weights, on `load_weights` while the weights sleep, and on `sleep` without
`enable_sleep_mode`. It counts weight syncs (`weight_syncs`: runs of `load_weights` calls with nothing
else between them, one per TRL `sync_weights`) and logs what happened in order (`events`).
"""

from __future__ import annotations

import copy
import datetime
import json
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch


class StandInVLLM:
    """The stand-in server; `url` is its base URL while it runs (a context manager)."""

    def __init__(self, model: Any, name: str = "stand-in", tokenizer: Any = None, alphabet: list[int] | None = None):
        self.model = copy.deepcopy(model).eval()
        self.name = name
        self.tokenizer = tokenizer  # decodes replies for `stop` strings (without it they are refused)
        self.alphabet = alphabet  # named replies instead of sampled ones (see the module docstring)
        self.requests: list[dict[str, Any]] = []  # every /v1/completions body
        self.completions: list[list[int]] = []  # every choice's token_ids, in order
        self.weight_syncs = 0
        self.prefix_cache_resets = 0
        self.transfer_group: Any = None  # the server's side of the weight-transfer group (gloo here)
        self.updating = False  # between /start_weight_update and /finish_weight_update
        self.paused = False
        self.transfer_events: list[str] = []  # the weight-transfer routes called, in order
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # ---- lifecycle -----------------------------------------------------------------------------------
    def __enter__(self) -> StandInVLLM:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep the test output clean
                pass

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path == "/health":
                    self._reply(200, {})
                elif path == "/v1/models":
                    self._reply(200, {"data": [{"id": owner.name}]})
                elif path == "/server_info":
                    dtype = str(next(owner.model.parameters()).dtype)
                    config = {"logprobs_mode": "processed_logprobs", "dtype": dtype}
                    transfer = {"backend": "gloo (stand-in for nccl)"}
                    self._reply(200, {"vllm_config": {"model_config": config, "weight_transfer_config": transfer}})
                elif path == "/get_world_size":
                    self._reply(200, {"world_size": 1})
                else:
                    self._reply(404, {"error": f"no route {path}"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path == "/v1/completions":
                    self._reply(200, owner.complete(body))
                elif self.path == "/reset_prefix_cache":
                    owner.prefix_cache_resets += 1
                    self._reply(200, {"success": True})
                elif self.path.split("?")[0] in owner.TRANSFER_ROUTES:
                    try:
                        owner.transfer(self.path.split("?")[0], body)
                    except Exception as error:  # the client raises on a status other than 200
                        self._reply(500, {"error": f"{type(error).__name__}: {error}"})
                    else:
                        self._reply(200, {})
                else:
                    self._reply(404, {"error": f"no route {self.path}"})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self.transfer_group = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the stand-in is not running"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # ---- what the NCCL weight transfer would do --------------------------------------------------------
    def receive_weights(self, metadata: list[tuple[str, str, list[int]]], named_params: Any) -> None:
        """Copy streamed `(name, tensor)` pairs into the model (vLLM's names: no PEFT/FSDP prefixes)."""
        own = dict(self.model.named_parameters())
        names = [name for name, _, _ in metadata]
        with self._lock, torch.no_grad():
            for name, tensor in named_params:
                if name not in own or name not in names:
                    raise KeyError(f"the trainer pushed {name!r}, which the served model does not have")
                own[name].copy_(tensor)
        self.weight_syncs += 1

    # ---- the weight-transfer routes (gloo instead of NCCL: see the module docstring) -------------------
    TRANSFER_ROUTES = (
        "/init_weight_transfer_engine",
        "/start_weight_update",
        "/update_weights",
        "/finish_weight_update",
        "/pause",
        "/resume",
    )

    def transfer(self, route: str, body: dict[str, Any]) -> None:
        self.transfer_events.append(route)
        if route == "/init_weight_transfer_engine":
            info = body["init_info"]
            self.transfer_group = _join_group(
                info["master_address"], info["master_port"], info["rank_offset"], info["world_size"]
            )
        elif route == "/start_weight_update":
            if self.updating:
                raise RuntimeError("start_weight_update while an update is open")
            self.updating = True
        elif route == "/update_weights":
            if not self.updating:
                raise RuntimeError("update_weights outside start_weight_update/finish_weight_update")
            if self.transfer_group is None:
                raise RuntimeError("update_weights before init_weight_transfer_engine")
            info = body["update_info"]
            own = dict(self.model.named_parameters())
            for name, dtype, shape in zip(info["names"], info["dtype_names"], info["shapes"], strict=True):
                if name not in own:
                    raise KeyError(f"the trainer pushed {name!r}, which the served model does not have")
                tensor = torch.empty(shape, dtype=getattr(torch, dtype))
                _broadcast(self.transfer_group, tensor)
                with self._lock, torch.no_grad():  # not while a reply samples
                    own[name].copy_(tensor)
        elif route == "/finish_weight_update":
            if not self.updating:
                raise RuntimeError("finish_weight_update without start_weight_update")
            self.updating = False
            self.weight_syncs += 1
        elif route == "/pause":
            self.paused = True
        elif route == "/resume":
            self.paused = False

    # ---- generation ---------------------------------------------------------------------------------
    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        prompts = body["prompt"]
        if not prompts or not all(isinstance(p, list) for p in prompts):
            raise ValueError("this stand-in takes token-id prompts only, as TRL sends them")
        n = int(body.get("n", 1))
        stops = set(body.get("stop_token_ids") or [])
        eos = self.model.generation_config.eos_token_id
        stops |= set(eos if isinstance(eos, list) else [eos])
        texts = body.get("stop") or []
        texts = [texts] if isinstance(texts, str) else list(texts)
        if texts and self.tokenizer is None and self.alphabet is None:
            raise ValueError("this stand-in needs the tokenizer to apply stop strings")
        choices = []
        for prompt in prompts:
            for _ in range(n):
                if self.alphabet is not None:
                    ids = named_reply(
                        prompt, int(body["max_tokens"]), self.alphabet, int(eos[0] if isinstance(eos, list) else eos)
                    )
                    logps = [NAMED_LOGPROB] * len(ids)
                else:
                    ids, logps = self._sample(
                        prompt, int(body["max_tokens"]), float(body.get("temperature", 1.0)), stops, texts
                    )
                self.completions.append(ids)
                choices.append(
                    {
                        "index": len(choices),
                        "prompt_token_ids": prompt,
                        "token_ids": ids,
                        "logprobs": {
                            "tokens": [f"token_id:{t}" for t in ids],
                            "token_logprobs": logps,
                            "top_logprobs": [{f"token_id:{t}": lp} for t, lp in zip(ids, logps, strict=True)],
                        },
                    }
                )
        return {"id": "cmpl-stand-in", "object": "text_completion", "model": self.name, "choices": choices}

    def _sample(
        self, prompt: list[int], max_tokens: int, temperature: float, stops: set[int], texts: list[str]
    ) -> tuple[list, list]:
        ids: list[int] = []
        logps: list[float] = []
        with self._lock, torch.no_grad():
            for _ in range(max_tokens):
                logits = self.model(input_ids=torch.tensor([prompt + ids])).logits[0, -1].float()
                if temperature > 0:
                    dist = torch.log_softmax(logits / temperature, dim=-1)
                    token = int(torch.multinomial(dist.exp(), 1))
                else:
                    dist = torch.log_softmax(logits, dim=-1)
                    token = int(dist.argmax())
                ids.append(token)
                logps.append(float(dist[token]))
                if token in stops:
                    break
                if texts and any(t in self.tokenizer.decode(ids, skip_special_tokens=False) for t in texts):
                    break
        return ids, logps


# ---- the trainer's side of the weight-transfer group, over gloo ---------------------------------------
_TIMEOUT = datetime.timedelta(seconds=60)


class _Group:
    """What TRL's `close_communicator` reaches into (`communicator.group.store`, `.socket`), and the gloo group."""

    def __init__(self, store: Any, process_group: Any):
        self.store, self.socket, self.process_group = store, None, process_group


class GlooCommunicator:
    """The trainer's end of the weight-transfer group (vLLM's is NCCL's `PyNcclCommunicator`)."""

    def __init__(self, group: _Group):
        self.group = group


def _join_group(address: str, port: int, rank: int, world_size: int) -> _Group:
    from torch.distributed import ProcessGroupGloo, TCPStore

    store = TCPStore(address, port, world_size, rank == 0, timeout=_TIMEOUT, wait_for_workers=False)
    return _Group(store, ProcessGroupGloo(store, rank, world_size, _TIMEOUT))


def _broadcast(group: Any, tensor: torch.Tensor) -> None:
    from torch.distributed import BroadcastOptions

    options = BroadcastOptions()
    options.rootRank = 0
    process_group = group.process_group if isinstance(group, _Group) else group.group.process_group
    process_group.broadcast([tensor], options).wait()


def gloo_trainer_init(init_info: dict[str, Any]) -> GlooCommunicator:
    """Stands in for vLLM's `nccl_common.trainer_init`: the trainer, rank 0, hosts the rendezvous and joins."""
    return GlooCommunicator(
        _join_group(init_info["master_address"], init_info["master_port"], 0, init_info["world_size"])
    )


def gloo_broadcast_producer(iterator: Any, group: GlooCommunicator, src: int, post_iter_func: Any) -> None:
    """Stands in for vLLM's `packed_nccl_broadcast_producer`: each tensor broadcast from `src` in turn (not packed)."""
    if src != 0:
        raise ValueError("the trainer is rank 0 of the weight-transfer group")
    for item in iterator:
        _broadcast(group, post_iter_func(item).detach().to("cpu").contiguous())


def gloo_init_communicator(self: Any, device: Any = 0) -> None:
    """Stands in for `VLLMClient.init_communicator` on a CPU (which it refuses): the same requests in the same
    order (`/server_info`, `/get_world_size`, `/init_weight_transfer_engine` while the trainer joins)."""
    import atexit

    if self.get_server_info()["weight_transfer_config"] is None:
        raise RuntimeError("the stand-in has no weight-transfer engine")
    init_info = {
        "master_address": "127.0.0.1",
        "master_port": self.group_port,
        "rank_offset": 1,
        "world_size": self.get_world_size() + 1,
        "packed": True,
    }
    with ThreadPoolExecutor(max_workers=1) as executor:
        future = executor.submit(
            self._post, f"{self.base_url}/init_weight_transfer_engine", json={"init_info": init_info}
        )
        self.communicator = gloo_trainer_init(init_info)
        future.result()
    atexit.register(self.close_communicator)


def use_gloo_transfer(monkeypatch: Any) -> None:
    """Make TRL's `VLLMClient` build and stream over the gloo stand-ins (and see vLLM as installed)."""
    import trl.generation.vllm_client as client
    import trl.generation.vllm_generation as generation

    monkeypatch.setattr(client, "is_vllm_available", lambda *a, **k: True)
    monkeypatch.setattr(generation, "is_vllm_available", lambda *a, **k: True)
    monkeypatch.setattr(client, "_HAS_STATEFUL_TRAINER_ENGINE", True)  # vLLM >= 0.28's trainer side
    monkeypatch.setattr(client, "_HAS_RESET_PREFIX_CACHE_SUCCESS", True)
    monkeypatch.setattr(client, "open_trainer_endpoint", gloo_trainer_init, raising=False)
    monkeypatch.setattr(client, "packed_nccl_broadcast_producer", gloo_broadcast_producer, raising=False)
    monkeypatch.setattr(client.VLLMClient, "init_communicator", gloo_init_communicator)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- replies that name their prompt ------------------------------------------------------------------
#: Tokens of a named reply before its end token, and the logprob reported for each.
NAMED_LENGTH = 6
NAMED_LOGPROB = -1.0


def named_reply(prompt: list[int], max_tokens: int, alphabet: list[int], end: int) -> list[int]:
    """`NAMED_LENGTH` tokens of `alphabet` from a CRC-32 of the prompt's ids, then `end` (to `max_tokens`)."""
    code = zlib.crc32(json.dumps([int(t) for t in prompt]).encode())
    ids = []
    for _ in range(NAMED_LENGTH):
        code, digit = divmod(code, len(alphabet))
        ids.append(alphabet[digit])
    return [*ids, end][:max_tokens]


# ---- vllm.LLM for TRL's colocate mode ----------------------------------------------------------------
class StandInSamplingParams:
    """`vllm.SamplingParams` as TRL builds it: keyword arguments, kept as they are."""

    def __init__(self, **kwargs: Any):
        self.kwargs = kwargs

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["kwargs"][name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass
class _Logprob:  # vllm.logprobs.Logprob: what TRL's extract_logprobs reads
    logprob: float
    rank: int = 1


@dataclass
class _Completion:  # vllm.CompletionOutput
    token_ids: list[int]
    logprobs: list[dict[int, _Logprob]]


@dataclass
class _RequestOutput:  # vllm.RequestOutput
    prompt_token_ids: list[int]
    outputs: list[_Completion]


class _Model:  # ...model_runner.model: takes the weights TRL's sync_weights pushes
    def __init__(self, engine: StandInLLM):
        self.engine = engine
        self.loaded: list[str] = []  # every name loaded, in order
        self.last: dict[str, torch.Tensor] = {}  # each weight as last loaded

    def load_weights(self, weights: list[tuple[str, Any]]) -> None:
        names = [name for name, _ in weights]
        self.engine._load(names)
        self.loaded += names
        self.last.update((name, tensor.detach().clone()) for name, tensor in weights)


class StandInLLM:
    """A stand-in for `vllm.LLM` (see the module docstring); TRL constructs it with `LLM(**kwargs)`.

    Args:
        alphabet: The named replies' tokens.
        end: The token that ends a named reply (one of the caller's end tokens).
        weight_names: The names the served model's weights load under; after a level-2 sleep, `generate`
            needs every one loaded again (None: any load will do).
        **kwargs: What TRL passes to `vllm.LLM` (kept in `options`).
    """

    def __init__(self, *, alphabet: list[int], end: int, weight_names: list[str] | None = None, **kwargs: Any):
        self.alphabet, self.end = alphabet, end
        self.options = kwargs
        self.tensor_parallel_size = int(kwargs.get("tensor_parallel_size", 1))
        self.sleep_mode = bool(kwargs.get("enable_sleep_mode", False))
        self.weight_names = set(weight_names) if weight_names is not None else None
        self.calls: list[dict[str, Any]] = []  # per generate: its prompts and sampling parameters
        self.prefix_cache_resets = 0
        self.sleeping: set[str] = set()  # the tags asleep now
        self.missing: set[str] | None = None  # weights discarded and not loaded again (None: all there)
        self.events: list[str] = []  # "sleep(2)", "wake_up(kv_cache)", "sync", "generate", in order
        self.weight_syncs = 0
        self._loading = False  # inside a run of load_weights calls
        model = _Model(self)
        # the attribute path TRL's sync_weights takes to the model
        runner = type("ModelRunner", (), {"model": model})()
        worker = type("Worker", (), {"model_runner": runner})()
        executor = type("Executor", (), {"driver_worker": worker})()
        self.llm_engine = type("Engine", (), {"model_executor": executor})()
        self.model = model

    def reset_prefix_cache(self) -> None:
        self._loading = False
        self.prefix_cache_resets += 1

    # ---- sleep mode --------------------------------------------------------------------------------
    def sleep(self, level: int = 1) -> None:
        """vLLM's `LLM.sleep`: level 1 offloads the weights, level 2 discards them; the KV cache goes."""
        if not self.sleep_mode:
            raise RuntimeError("LLM.sleep needs the engine built with enable_sleep_mode=True")
        self.events.append(f"sleep({level})")
        self.reset_prefix_cache()  # as vLLM's LLM.sleep does first
        if self.sleeping:  # vLLM: "Executor is already sleeping."
            return
        self.sleeping = {"weights", "kv_cache"}
        if level >= 2:
            self.missing = set(self.weight_names) if self.weight_names is not None else {"*"}

    def wake_up(self, tags: list[str] | None = None) -> None:
        """vLLM's `LLM.wake_up`: the tags named (all with None) are in memory again."""
        self._loading = False
        self.events.append(f"wake_up({','.join(tags) if tags else ''})")
        if not self.sleeping or any(tag not in self.sleeping for tag in tags or ()):
            return  # vLLM warns ("Executor is not sleeping." / "Tag ... is not in sleeping tags") and returns
        self.sleeping = self.sleeping - set(tags) if tags else set()

    def _load(self, names: list[str]) -> None:
        if "weights" in self.sleeping:
            raise RuntimeError("load_weights while the weights sleep: wake_up(tags=['weights']) first")
        if not self._loading:
            self._loading = True
            self.weight_syncs += 1
            self.events.append("sync")
        if self.missing is not None:
            self.missing = (self.missing - set(names)) if self.weight_names is not None else set()
            if not self.missing:
                self.missing = None

    # ---- generation ---------------------------------------------------------------------------------
    def generate(
        self, prompts: list[dict[str, Any]], sampling_params: StandInSamplingParams, use_tqdm: bool = True
    ) -> list[_RequestOutput]:
        self._loading = False
        if self.sleeping:
            raise RuntimeError(f"generate while {sorted(self.sleeping)} sleep: wake_up first")
        if self.missing is not None:
            raise RuntimeError(f"generate with weights a level-2 sleep discarded and not loaded again: {self.missing}")
        self.events.append("generate")
        ids = [list(p["prompt_token_ids"]) for p in prompts]
        params = dict(sampling_params.kwargs)
        if self.tensor_parallel_size > 1:
            self._check_group_agrees(ids, params)
        self.calls.append({"prompts": ids, **params})
        outputs = []
        for prompt in ids:
            reply = named_reply(prompt, int(params["max_tokens"]), self.alphabet, self.end)
            logprobs = [{t: _Logprob(NAMED_LOGPROB)} for t in reply]
            outputs.append(_RequestOutput(prompt, [_Completion(reply, logprobs)]))
        return outputs

    def _check_group_agrees(self, ids: list[list[int]], params: dict[str, Any]) -> None:
        import torch.distributed as dist

        if dist.get_world_size() != self.tensor_parallel_size:
            raise ValueError("this stand-in's tensor-parallel group must be every process")
        everyone: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, (ids, params))
        if any(other != everyone[0] for other in everyone):
            raise RuntimeError("the ranks of a tensor-parallel group called vLLM with different prompts or parameters")
