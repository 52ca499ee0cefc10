"""Deep Search cache entries: manifests, checks on open, rebuilds of damaged entries, killed and concurrent builds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentgym_envs.deepsearch import cache as C
from agentgym_envs.deepsearch import data as D
from agentgym_envs.deepsearch.retrieval import open_local_retriever

NUM_DOCS = 300


@pytest.fixture(autouse=True)
def _fresh_process_state() -> None:
    D.clear_shared()
    yield
    D.clear_shared()


def _write(tmp: Path) -> None:
    (tmp / "a.bin").write_bytes(bytes(range(256)) * 64)
    (tmp / "sub").mkdir()
    (tmp / "sub" / "b.txt").write_text("second file")


def _side_folders(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(".") and not p.name.endswith(".lock"))


def _flip_byte(path: Path, offset: int) -> None:
    """Change one byte in place, keeping the file's size and modification time (silent corruption)."""
    stat = path.stat()
    with open(path, "r+b") as file:
        file.seek(offset)
        byte = file.read(1)
        file.seek(offset)
        file.write(bytes([byte[0] ^ 0xFF]))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


# ---- manifests and checks -----------------------------------------------------------------------------
def test_entry_has_a_manifest_and_is_checksummed_once_per_process(tmp_path: Path, monkeypatch) -> None:
    target = C.build_once(tmp_path / "entry", _write)
    manifest = json.loads((target / C.MANIFEST).read_text())
    assert sorted(manifest["files"]) == ["a.bin", "sub/b.txt"]
    assert manifest["files"]["a.bin"]["size"] == 256 * 64 and len(manifest["files"]["a.bin"]["blake2b"]) == 128
    hashed = []
    real_digest = C._digest
    monkeypatch.setattr(C, "_digest", lambda path: hashed.append(path.name) or real_digest(path))  # a spy
    C.forget_verified()  # as a fresh process
    C.build_once(target, _write)
    assert sorted(hashed) == ["a.bin", "b.txt"]
    C.build_once(target, _write)
    assert len(hashed) == 2  # later opens of this process check sizes only
    assert C.check_entry(target, checksums=True) is None and _side_folders(tmp_path) == []


def test_build_once_builds_once_survives_a_lost_race_and_passes_build_errors_on(tmp_path: Path) -> None:
    calls = []

    def build(tmp: Path) -> None:
        calls.append(tmp)
        (tmp / "x").write_text("mine")

    target = tmp_path / "artifact"
    assert C.build_once(target, build) == target and (target / "x").read_text() == "mine"
    C.build_once(target, build)
    assert len(calls) == 1

    def racing(tmp: Path) -> None:  # a builder the lock does not see (another host) publishes first
        winner = tmp.parent / "winner"
        winner.mkdir()
        (winner / "x").write_text("winner")
        C.write_manifest(winner)
        winner.rename(tmp.parent / "raced")

    assert (C.build_once(tmp_path / "raced", racing) / "x").read_text() == "winner"

    def racing_unsound(tmp: Path) -> None:
        (tmp.parent / "unsound").mkdir()
        (tmp.parent / "unsound" / "x").write_text("no manifest")

    with pytest.raises(C.CacheError, match=r"unsound could not be published .*rm -rf"):
        C.build_once(tmp_path / "unsound", racing_unsound)

    def failing(tmp: Path) -> None:
        raise ValueError("broken corpus")

    with pytest.raises(ValueError, match="broken corpus"):
        C.build_once(tmp_path / "never", failing)
    assert not (tmp_path / "never").exists() and _side_folders(tmp_path) == []


def test_a_file_changed_with_a_new_mtime_is_checksummed_on_every_open(tmp_path: Path) -> None:
    target = C.build_once(tmp_path / "entry", _write)
    stat = (target / "a.bin").stat()
    _flip_byte(target / "a.bin", 10)
    os.utime(target / "a.bin", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # as any ordinary write does
    assert "a.bin does not match its checksum" in C.check_entry(target, checksums=False)


def test_truncated_synthetic_corpus_is_rebuilt(tmp_path: Path) -> None:
    store, questions = D.load_synthetic(NUM_DOCS, 5, tmp_path)
    expected = [store[i] for i in (0, 7, NUM_DOCS - 1)], questions["test"][3]
    corpus = D.synthetic_dir(NUM_DOCS, 5, tmp_path) / "corpus.jsonl"
    size = corpus.stat().st_size
    os.truncate(corpus, size // 2)
    assert "corpus.jsonl has" in C.check_entry(corpus.parent, checksums=False)
    D.clear_shared()  # a later process opens the cache
    store, questions = D.load_synthetic(NUM_DOCS, 5, tmp_path)
    assert corpus.stat().st_size == size
    assert ([store[i] for i in (0, 7, NUM_DOCS - 1)], questions["test"][3]) == expected
    assert _side_folders(tmp_path) == []


def test_same_size_corruption_of_a_bm25_index_is_detected_and_rebuilt(tmp_path: Path) -> None:
    retriever = open_local_retriever("bm25", num_docs=NUM_DOCS, seed=5, cache_dir=str(tmp_path))
    queries = ["capital", "founded university", "river country"]
    expected = [retriever.search(q, 3) for q in queries]
    index_dir = retriever.index_dir
    scores = next(p for p in sorted(index_dir.iterdir()) if p.name.startswith("data"))
    _flip_byte(scores, scores.stat().st_size - 3)  # a BM25 score: results would change silently
    assert "does not match its checksum" in C.check_entry(index_dir, checksums=True)
    assert C.verify_cache(tmp_path)[index_dir] is not None
    D.clear_shared()
    reopened = open_local_retriever("bm25", num_docs=NUM_DOCS, seed=5, cache_dir=str(tmp_path))
    assert [reopened.search(q, 3) for q in queries] == expected
    assert C.check_entry(index_dir, checksums=True) is None
    assert all(problem is None for problem in C.verify_cache(tmp_path).values())


def test_entry_without_a_manifest_is_rebuilt(tmp_path: Path) -> None:
    target = tmp_path / "entry"
    target.mkdir()
    (target / "a.bin").write_text("made by an older version")
    C.build_once(target, _write)
    assert (target / "sub" / "b.txt").read_text() == "second file" and (target / C.MANIFEST).is_file()


def test_damaged_entry_that_cannot_be_rebuilt_names_itself_and_the_fix(tmp_path: Path) -> None:
    target = C.build_once(tmp_path / "entry", _write)
    os.truncate(target / "sub" / "b.txt", 3)

    def failing(tmp: Path) -> None:
        raise OSError("No space left on device")

    with pytest.raises(C.CacheError) as caught:
        C.build_once(target, failing)
    message = str(caught.value)
    assert str(target) in message and "sub/b.txt has 3 bytes" in message and "No space left" in message
    assert f"rm -rf '{target}'" in message and "cache_dir" in message
    assert _side_folders(tmp_path) == []
    C.build_once(target, _write)  # once the cause is gone, the next open repairs it
    assert C.check_entry(target, checksums=True) is None


def test_verify_cache_on_demand_removes_damaged_entries(tmp_path: Path) -> None:
    good = C.build_once(tmp_path / "good", _write)
    bad = C.build_once(tmp_path / "bad", _write)
    _flip_byte(bad / "a.bin", 0)
    report = C.verify_cache(tmp_path, remove_damaged=True)
    assert report[good] is None and "a.bin does not match its checksum" in report[bad]
    assert good.is_dir() and not bad.exists() and _side_folders(tmp_path) == []


# ---- killed and concurrent builds ---------------------------------------------------------------------
_BUILDER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from agentgym_envs.deepsearch.cache import build_once

    target, log, pause = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])

    def build(tmp):
        (tmp / "part").write_text("half")
        with open(log, "a") as out:
            out.write(f"build {os.getpid()}\\n")
        time.sleep(pause)
        (tmp / "who").write_text(str(os.getpid()))

    print((build_once(target, build) / "who").read_text(), flush=True)
    """
)


def _builder(target: Path, log: Path, pause: float) -> subprocess.Popen[str]:
    command = [sys.executable, "-c", _BUILDER, str(target), str(log), str(pause)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def _wait_for(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_killed_build_leaves_a_folder_that_the_next_build_removes(tmp_path: Path) -> None:
    target, log = tmp_path / "entry", tmp_path / "log"
    builder = _builder(target, log, pause=600)
    _wait_for(lambda: log.exists() and log.read_text(), "the builder to start")
    builder.send_signal(signal.SIGKILL)
    builder.wait(30)
    leftover = _side_folders(tmp_path)
    assert len(leftover) == 1 and f"-{builder.pid}-" in leftover[0] and not target.exists()
    # Leftovers of builders on other hosts: removed once old, kept while they may still be running.
    old = tmp_path / ".other.tmp-elsewhere-123-0123abcd"
    recent = tmp_path / ".other.tmp-elsewhere-123-4567abcd"
    old.mkdir(), recent.mkdir()
    os.utime(old, (time.time() - 2 * C.STALE_AFTER_S,) * 2)
    C.build_once(target, _write)
    assert _side_folders(tmp_path) == [recent.name]
    assert C.check_entry(target, checksums=True) is None


def test_concurrent_builders_end_with_one_good_entry(tmp_path: Path) -> None:
    target, log = tmp_path / "entry", tmp_path / "log"
    builders = [_builder(target, log, pause=1.0) for _ in range(2)]
    answers = [builder.communicate(timeout=120)[0].strip() for builder in builders]
    assert all(builder.returncode == 0 for builder in builders)
    assert answers[0] == answers[1] and answers[0] in {str(b.pid) for b in builders}
    assert len(log.read_text().splitlines()) == 1  # the second waited for the first and used its entry
    assert C.check_entry(target, checksums=True) is None and _side_folders(tmp_path) == []
