"""The CPU generation worker of async training: the HF sampler in a process of its own.

`GenerationWorker` starts a spawned process that holds a copy of the policy, a `VersionedEngine` and a
`VersionedGenerator` over the rollout backend (the KV-cached sampler by default). The trainer sends it:

- jobs (`submit(index, tasks, max_turns)`): play one episode per task under that turn limit; the
  episodes come back by index (`result(index)`), in the order submitted;
- weights (`send_weights(version, state_dict)`): written to a file in the worker's folder (a temporary
  name, then renamed, so that the worker never reads half a file) and announced on the same queue as
  the jobs, so a job submitted after a sync never starts under older weights. The worker loads the
  newest announced version before each job and between segments of a reply (partial rollouts), then
  deletes the files of that version and older ones.

The worker's copy samples where `WorkerSpec.device` says: the CPU, or on a GPU the trainer's device,
which the two processes then share (the trainer computes while the worker samples).

One worker serves one trainer process: in a multi-process run every rank starts its own, which
generates that rank's share of each batch (the CPU sampler has no server that ranks could share).
A failure in the worker comes back as a `RuntimeError` with its traceback at the next `result`.

`ServerGenerationWorker` is the same job interface with vLLM in server mode: a **thread** of the
trainer process that plays the jobs with a `VersionedEngine` whose turns go to the server
(`backends.vllm.ServerGeneration`, TRL's `VLLMClient`), not a process with a copy of the policy. Why a
thread: the server holds the policy and does the sampling, so the worker side only waits on HTTP and
steps envs (the reason the CPU worker is a process, its sampler's forward passes competing with the
trainer's for the interpreter and the cores, is gone); and the weights go to the server from the
trainer process, over TRL's transfer (an NCCL group bound to the trainer's device), so the push and
the generation must be ordered per segment to know which version sampled each token. In one process a
`WeightGate` does it (`push` waits for the segment in flight and holds the next); across processes it
would need a handshake per push. The cost: env code that holds the interpreter lock (pure-Python
scenarios) runs beside the trainer's Python; backends out of process (JVM, browser, remote envs) do not.
"""

from __future__ import annotations

import os
import queue
import shutil
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


@dataclass
class WorkerSpec:
    """What the worker process needs to rebuild the trainer's rollout (picklable).

    Args:
        model_config: The policy's transformers config (the worker builds the model from it).
        tokenizer: The trainer's tokenizer.
        dtype: The dtype the worker's copy holds its weights in.
        engine_kwargs: Keyword arguments of `VersionedEngine` (no env pool).
        sampler_kwargs: Keyword arguments of `make_generator` after the model, pad and end tokens.
        pad_token_id: The tokenizer's pad token.
        segment_tokens: Tokens per segment of a reply between weight polls (None: one poll per call).
        threads: torch threads of the worker process.
        imports: Modules to import in the worker before it makes envs: those that register env ids outside
            `agentgym_envs` (a spawned process has only what it imports).
        device: Where the worker's copy samples ("cpu", or the trainer's CUDA device, which it then shares).
    """

    model_config: Any
    tokenizer: Any
    dtype: Any = torch.float32
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    sampler_kwargs: dict[str, Any] = field(default_factory=dict)
    pad_token_id: int = 0
    segment_tokens: int | None = None
    threads: int = 1
    imports: list[str] = field(default_factory=list)
    device: str = "cpu"


class GenerationWorker:
    """A generation process beside the trainer (see the module docstring).

    Args:
        spec: How to build the rollout in the worker.
        folder: Where weight files are written (created; removed by `close`).
    """

    def __init__(self, spec: WorkerSpec, folder: str | Path):
        self.spec = spec
        self.folder = Path(folder)
        self.process: Any = None
        self._done: dict[int, tuple[list[Any], dict[str, Any]]] = {}
        #: Weight versions sent so far.
        self.syncs = 0

    def start(self, version: int, state_dict: dict[str, torch.Tensor]) -> None:
        """Start the process with the weights of `version`."""
        import torch.multiprocessing as mp

        self.folder.mkdir(parents=True, exist_ok=True)
        context = mp.get_context("spawn")
        self._inbox, self._outbox = context.Queue(), context.Queue()
        path = self._write(version, state_dict)
        self.process = context.Process(
            target=_main,
            args=(self.spec, version, str(path), self._inbox, self._outbox),
            name="agentgym-generation-worker",
            daemon=True,
        )
        self.process.start()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def submit(self, index: int, tasks: list[Any], max_turns: int | None = None) -> None:
        """Ask for one episode per task under the turn limit `max_turns` (None: each env's default), returned by
        `result(index)`."""
        self._inbox.put(("job", index, list(tasks), max_turns))

    def send_weights(self, version: int, state_dict: dict[str, torch.Tensor]) -> None:
        """Make `version`'s weights the newest the worker will take."""
        path = self._write(version, state_dict)
        self._inbox.put(("weights", version, str(path)))
        self.syncs += 1

    def result(self, index: int, timeout: float = 3600.0) -> tuple[list[Any], dict[str, Any]]:
        """The episodes of job `index` and the worker's statistics for it (waits until they are done)."""
        deadline = time.monotonic() + timeout
        while index not in self._done:
            try:
                message = self._outbox.get(timeout=1.0)
            except queue.Empty:
                if not self.alive:
                    code = self.process.exitcode if self.process is not None else None
                    raise RuntimeError(f"the generation worker died (exit code {code}) before job {index}") from None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"job {index} of the generation worker took over {timeout} s") from None
                continue
            if message[0] == "error":
                raise RuntimeError(f"the generation worker failed:\n{message[1]}")
            _, done, episodes, stats = message
            self._done[done] = (episodes, stats)
        return self._done.pop(index)

    def close(self) -> None:
        """Stop the process (by its handle: asked first, then terminated) and remove the weight files."""
        if self.process is not None:
            if self.process.is_alive():
                self._inbox.put(None)
                self.process.join(timeout=30)
            if self.process.is_alive():
                self.process.terminate()
                self.process.join(timeout=10)
            self.process = None
        shutil.rmtree(self.folder, ignore_errors=True)

    def _write(self, version: int, state_dict: dict[str, torch.Tensor]) -> Path:
        path = self.folder / f"weights-{version}.pt"
        partial = self.folder / f".weights-{version}.pt.partial"
        torch.save({k: v.detach().to("cpu") for k, v in state_dict.items()}, partial)
        os.replace(partial, path)  # the worker sees the whole file or none
        return path


class ServerGenerationWorker:
    """Generation through a vLLM server beside the trainer: a thread of the trainer's process (module docstring).

    Args:
        engine_kwargs: Keyword arguments of `VersionedEngine` (no env pool).
        tokenizer: The trainer's tokenizer.
        make_backend: Builds the `TurnGenerator` over the server (called in the thread, again after each push).
        segment_tokens: Tokens per segment of a reply between two looks at the version (None: one per call).
        gate: Orders segments and pushes (a new one by default).
    """

    def __init__(
        self,
        engine_kwargs: dict[str, Any],
        tokenizer: Any,
        make_backend: Any,
        segment_tokens: int | None = None,
        gate: Any = None,
    ):
        from agentgym_train.rollout.versioned import WeightGate

        self.engine_kwargs = engine_kwargs
        self.tokenizer = tokenizer
        self.make_backend = make_backend
        self.segment_tokens = segment_tokens
        self.gate = gate or WeightGate()
        #: The version the server holds (set by `push`, read by the generation thread under the gate).
        self.version = 0
        #: Weight versions pushed so far (after the start).
        self.syncs = 0
        self.thread: threading.Thread | None = None
        self._jobs: queue.Queue = queue.Queue()
        self._done: dict[int, tuple[list[Any], dict[str, Any]]] = {}
        self._cond = threading.Condition()
        self._error: str | None = None
        self._stopping = False

    def start(self, version: int, push: Any = None) -> None:
        """Run `push()` (the weights of `version` to the server; None: it holds them already), then start the
        thread."""
        if push is not None:
            with self.gate.push():
                push()
        self.version = version
        self.thread = threading.Thread(target=self._run, name="agentgym-server-generation", daemon=True)
        self.thread.start()

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def submit(self, index: int, tasks: list[Any], max_turns: int | None = None) -> None:
        """Ask for one episode per task under the turn limit `max_turns`, returned by `result(index)`."""
        self._jobs.put((index, list(tasks), max_turns))

    def push(self, version: int, push: Any) -> None:
        """Run `push()`, which puts `version`'s weights on the server, with no segment in flight; the segments
        after it record `version`."""
        with self.gate.push():
            push()
            self.version = version
        self.syncs += 1

    def result(self, index: int, timeout: float = 3600.0) -> tuple[list[Any], dict[str, Any]]:
        """The episodes of job `index` and their statistics (waits until they are done)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while index not in self._done:
                if self._error is not None:
                    raise RuntimeError(f"the generation thread failed:\n{self._error}")
                if not self.alive:
                    raise RuntimeError(f"the generation thread stopped before job {index}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"job {index} of the generation thread took over {timeout} s")
                self._cond.wait(timeout=1.0)
            return self._done.pop(index)

    def close(self) -> None:
        """Stop the thread at its next segment boundary (the job it plays and those queued are dropped)."""
        if self.thread is not None:
            self._stopping = True
            while True:
                try:
                    self._jobs.get_nowait()
                except queue.Empty:
                    break
            self._jobs.put(None)
            self.thread.join(timeout=600)
            self.thread = None

    def _run(self) -> None:
        try:
            self._serve()
        except _Stopped:
            pass
        except BaseException:  # every failure goes back to the trainer, which raises it
            with self._cond:
                self._error = traceback.format_exc()
                self._cond.notify_all()

    def _serve(self) -> None:
        from agentgym_train.rollout.versioned import VersionedEngine, VersionedGenerator

        engine = VersionedEngine(self.tokenizer, **self.engine_kwargs)

        def poll() -> tuple[int, Any] | None:  # called under the gate: the version cannot move meanwhile
            return (self.version, lambda: None) if self.version > generator.version else None

        @contextmanager
        def segment() -> Iterator[None]:
            if self._stopping:  # `close`: no more requests to the server
                raise _Stopped
            with self.gate.segment():
                yield

        generator = VersionedGenerator(
            self.make_backend,
            engine.eos_token_ids,
            poll,
            version=self.version,
            segment_tokens=self.segment_tokens,
            gate=segment,
        )
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                index, tasks, max_turns = job
                before = (generator.updates, generator.mid_reply_updates)
                engine.max_turns = max_turns
                episodes = engine.run(tasks, generator)
                stats = {
                    "version": generator.version,
                    "max_turns": engine.max_turns,
                    "generation_time": engine.timing["generation"],
                    "env_time": engine.timing["env"],
                    "updates": generator.updates - before[0],
                    "mid_reply_updates": generator.mid_reply_updates - before[1],
                }
                with self._cond:
                    self._done[index] = (episodes, stats)
                    self._cond.notify_all()
        finally:
            engine.close()


class _Stopped(Exception):
    """The generation thread was asked to stop (`ServerGenerationWorker.close`)."""


def _main(spec: WorkerSpec, version: int, path: str, inbox: Any, outbox: Any) -> None:
    """The worker process: build the rollout, then play jobs until told to stop."""
    try:
        _serve(spec, version, path, inbox, outbox)
    except BaseException:  # every failure goes back to the trainer, which raises it
        outbox.put(("error", traceback.format_exc()))


def _serve(spec: WorkerSpec, version: int, path: str, inbox: Any, outbox: Any) -> None:
    import importlib

    from transformers import AutoModelForCausalLM

    import agentgym_envs  # noqa: F401  (registers the env ids in this process)
    from agentgym_train.rollout.backends import make_generator
    from agentgym_train.rollout.versioned import VersionedEngine, VersionedGenerator

    for module in spec.imports:
        importlib.import_module(module)
    torch.set_num_threads(spec.threads)
    model = AutoModelForCausalLM.from_config(spec.model_config, dtype=spec.dtype).to(spec.device)
    model.load_state_dict(torch.load(path, weights_only=True))
    model.eval()
    engine = VersionedEngine(spec.tokenizer, **spec.engine_kwargs)
    jobs: queue.Queue = queue.Queue()
    newest: dict[str, Any] = {"version": version, "path": path}
    lock = threading.Lock()

    def read() -> None:  # one queue for weights and jobs keeps their order: a job never precedes its sync
        while True:
            message = inbox.get()
            if message is None:
                jobs.put(None)
                return
            if message[0] == "weights":
                with lock:
                    if message[1] > newest["version"]:
                        newest.update(version=message[1], path=message[2])
            else:
                jobs.put(message)

    def poll() -> tuple[int, Any] | None:
        with lock:
            found = (newest["version"], newest["path"])
        if found[0] <= generator.version:
            return None

        def load() -> None:
            model.load_state_dict(torch.load(found[1], weights_only=True))
            for old in Path(found[1]).parent.glob("weights-*.pt"):
                if int(old.stem.split("-")[1]) <= found[0]:
                    old.unlink(missing_ok=True)

        return found[0], load

    def make() -> Any:
        return make_generator(model, spec.pad_token_id, engine.eos_token_ids, **spec.sampler_kwargs)

    generator = VersionedGenerator(
        make, engine.eos_token_ids, poll, version=version, segment_tokens=spec.segment_tokens
    )
    threading.Thread(target=read, name="agentgym-worker-inbox", daemon=True).start()
    while True:
        job = jobs.get()
        if job is None:
            return
        _, index, tasks, max_turns = job
        before = (generator.updates, generator.mid_reply_updates)
        generator.refresh()
        engine.max_turns = max_turns
        with torch.no_grad():
            episodes = engine.run(tasks, generator)
        stats = {
            "version": generator.version,
            "max_turns": engine.max_turns,
            "generation_time": engine.timing["generation"],
            "env_time": engine.timing["env"],
            "updates": generator.updates - before[0],
            "mid_reply_updates": generator.mid_reply_updates - before[1],
        }
        outbox.put(("episodes", index, episodes, stats))
