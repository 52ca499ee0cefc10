"""Cache entries of Deep Search: built once, published atomically, checked on every open, rebuilt when damaged.

An entry is a directory (a synthetic corpus, a corpus's row offsets, a BM25 index, dense embeddings)
made by a build function from sources the library can read again, so a damaged entry is rebuilt,
never trusted. `build_once(target, build)`:

- builds into a temporary sibling `.<name>.tmp-<host>-<pid>-<tag>`, writes `manifest.json` (size,
  modification time and BLAKE2b checksum of every file) into it, and renames it into place, so no
  process ever sees half an entry;
- holds an exclusive lock (`.<name>.lock`, `flock`) while it builds, so concurrent processes build an
  entry once and the others wait for it and then use it;
- checks an existing entry on every open: every file of the manifest is present with its size
  (always, cheap), and its checksum on the first open in a process (entries up to
  `CHECKSUM_LIMIT_BYTES`; larger ones when a file's modification time changed, or on demand with
  `verify_cache`);
- rebuilds an entry that fails a check (or has no manifest, as entries of older versions), and
  raises `CacheError` naming the entry and the fix when it cannot;
- removes temporary and discarded folders left by killed builds: those of a dead process on this
  host, and any older than `STALE_AFTER_S`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no cross-process lock, publishing stays atomic
    fcntl = None  # type: ignore[assignment]

#: Name of the manifest file inside every entry.
MANIFEST = "manifest.json"
#: Entries up to this size are checksummed on their first open in each process.
CHECKSUM_LIMIT_BYTES = 2 << 30
#: Temporary folders older than this are removed even when their builder looks alive (pid reuse, other hosts).
STALE_AFTER_S = 24 * 3600.0
_FORMAT = 1
_HOST = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:40] or "host"
_SIDE = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|trash)-(?P<host>\w*)-(?P<pid>\d+)-(?P<tag>[0-9a-f]{8})$")


class CacheError(RuntimeError):
    """A cache entry is damaged and could not be rebuilt; the message names the entry and the fix."""


# ---- manifests ----------------------------------------------------------------------------------------
def _digest(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "blake2b").hexdigest()


def _files(directory: Path) -> Iterator[Path]:
    for path in sorted(directory.rglob("*")):
        if path.is_file() and path.name != MANIFEST:
            yield path


def write_manifest(directory: Path) -> dict[str, Any]:
    """Record size, modification time and BLAKE2b checksum of every file under `directory` in its manifest."""
    files = {}
    for path in _files(directory):
        stat = path.stat()
        files[path.relative_to(directory).as_posix()] = {
            "size": stat.st_size,
            "mtime_ns": stat.st_mtime_ns,
            "blake2b": _digest(path),
        }
    manifest = {"format": _FORMAT, "files": files}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def _inside(name: str) -> bool:
    parts = Path(name).parts
    return bool(parts) and not Path(name).is_absolute() and ".." not in parts


def _read_manifest(directory: Path) -> tuple[dict[str, Any] | None, str | None]:
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"it has no {MANIFEST} (made by an older version, or not finished)"
    except (OSError, ValueError) as error:
        return None, f"its {MANIFEST} is unreadable ({error})"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or manifest.get("format") != _FORMAT:
        return None, f"its {MANIFEST} has an unknown format"
    for name, entry in files.items():
        sound = isinstance(entry, dict) and _inside(name) and isinstance(entry.get("blake2b"), str)
        if not sound or not all(type(entry.get(key)) is int for key in ("size", "mtime_ns")):
            return None, f"its {MANIFEST} has a malformed record for {name!r}"
    return manifest, None


def check_entry(directory: Path, checksums: bool | None = None) -> str | None:
    """Why the entry `directory` cannot be trusted, or None when it passes.

    Args:
        directory: The entry.
        checksums: True: compare every checksum; False: sizes only (and checksums of files whose
            modification time changed); None: checksums when the entry is at most `CHECKSUM_LIMIT_BYTES`.
    """
    if not directory.is_dir():
        return "it is not a directory"
    manifest, problem = _read_manifest(directory)
    if manifest is None:
        return problem
    files = manifest["files"]
    if checksums is None:
        checksums = sum(entry["size"] for entry in files.values()) <= CHECKSUM_LIMIT_BYTES
    to_hash = []
    for name, entry in files.items():
        path = directory / name
        try:
            stat = path.stat()
        except OSError:
            return f"{name} is missing"
        if stat.st_size != entry["size"]:
            return f"{name} has {stat.st_size:,} bytes, the manifest says {entry['size']:,} (truncated or overwritten)"
        if checksums or stat.st_mtime_ns != entry["mtime_ns"]:
            to_hash.append((name, path, entry["blake2b"]))
    for name, path, expected in to_hash:
        if _digest(path) != expected:
            return f"{name} does not match its checksum (the file was changed after it was built)"
    return None


# ---- first open per process ---------------------------------------------------------------------------
_VERIFIED: set[tuple[str, int, int]] = set()
_VERIFIED_LOCK = threading.Lock()


def _identity(directory: Path) -> tuple[str, int, int] | None:
    """The entry's path and its manifest's inode and mtime: a rebuilt entry gets a new identity."""
    try:
        stat = (directory / MANIFEST).stat()
    except OSError:
        return None
    return str(directory.resolve()), stat.st_ino, stat.st_mtime_ns


def forget_verified() -> None:
    """Checksum every entry again on its next open, as a fresh process does."""
    with _VERIFIED_LOCK:
        _VERIFIED.clear()


def _check_on_open(directory: Path) -> str | None:
    identity = _identity(directory)
    with _VERIFIED_LOCK:
        seen = identity is not None and identity in _VERIFIED
    problem = check_entry(directory, checksums=False if seen else None)
    if problem is None and identity is not None:
        with _VERIFIED_LOCK:
            _VERIFIED.add(identity)
    return problem


# ---- temporary and discarded folders ------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def clean_stale(parent: Path, max_age_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove the temporary and discarded folders under `parent` whose builder is gone; return them.

    A folder is stale when its builder process (named in the folder's name) is dead on this host, or
    when it is older than `max_age_s` (a builder on another host, or a reused process id).
    """
    removed = []
    try:
        children = list(parent.iterdir())
    except OSError:
        return removed
    now = time.time()
    for path in children:
        side = _SIDE.match(path.name)
        if side is None:
            continue
        mine = side["host"] == _HOST and int(side["pid"]) == os.getpid()
        dead = side["host"] == _HOST and not _alive(int(side["pid"]))
        try:
            old = now - path.lstat().st_mtime > max_age_s
        except OSError:
            continue
        if (dead or old) and not (mine and side["kind"] == "tmp"):
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(path)
    return removed


def _side_path(target: Path, kind: str) -> Path:
    return target.parent / f".{target.name}.{kind}-{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def discard(target: Path) -> None:
    """Move the entry `target` out of the way and delete it (open memory maps of it stay valid)."""
    trash = _side_path(target, "trash")
    try:
        os.rename(target, trash)
    except FileNotFoundError:
        return
    if trash.is_dir():
        shutil.rmtree(trash, ignore_errors=True)
    else:
        trash.unlink(missing_ok=True)


@contextlib.contextmanager
def _build_lock(target: Path) -> Iterator[None]:
    if fcntl is None:
        yield
        return
    with open(target.parent / f".{target.name}.lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


# ---- building -----------------------------------------------------------------------------------------
def _fix(target: Path) -> str:
    return (
        f"delete it (rm -rf '{target}') and run again, or use another cache directory "
        "(cache_dir=..., or $AGENTGYM_DEEPSEARCH_CACHE) that this process can write"
    )


def build_once(target: Path, build: Callable[[Path], None]) -> Path:
    """The checked cache entry `target`, made with `build(tmp_dir)` when it is missing or damaged.

    `build` writes the entry's files into the empty `tmp_dir`; the manifest is added and the folder
    renamed to `target`. Concurrent processes build it once (a file lock); a damaged entry is rebuilt.

    Raises:
        CacheError: `target` is damaged and rebuilding it failed (the message names it and the fix).
    """
    target = Path(target)
    problem = None
    if target.exists():
        problem = _check_on_open(target)
        if problem is None:
            return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _build_lock(target):
            if target.exists():  # another process may have built or repaired it while we waited
                problem = _check_on_open(target)
                if problem is None:
                    return target
            clean_stale(target.parent)
            if target.exists():
                discard(target)
            _build_into(target, build)
    except Exception as error:
        if problem is None:
            raise
        raise CacheError(
            f"Deep Search cache entry {target} is damaged ({problem}) and rebuilding it failed "
            f"({type(error).__name__}: {error}); {_fix(target)}"
        ) from error
    return target


def _build_into(target: Path, build: Callable[[Path], None]) -> None:
    tmp = _side_path(target, "tmp")
    tmp.mkdir()
    try:
        build(tmp)
        write_manifest(tmp)
        try:
            os.rename(tmp, target)
        except OSError as error:
            # Without a working lock (another host, no flock) another builder may have won the race.
            if check_entry(target, checksums=False) is not None:
                raise CacheError(
                    f"Deep Search cache entry {target} could not be published ({error}); {_fix(target)}"
                ) from error
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def entries(root: Path) -> Iterator[Path]:
    """Every cache entry with a manifest under `root` (entries without one are rebuilt when opened)."""
    for manifest in sorted(root.rglob(MANIFEST)):
        if not any(_SIDE.match(part) for part in manifest.relative_to(root).parts):  # not being built or removed
            yield manifest.parent


def verify_cache(root: Path, remove_damaged: bool = False) -> dict[Path, str | None]:
    """Checksum every entry under `root` (whatever its size); the problem of each, or None when it is sound.

    Args:
        root: A cache directory (see `agentgym_envs.deepsearch.data.cache_root`).
        remove_damaged: Delete damaged entries, so that the next open rebuilds them; stale temporary
            folders are removed as well.
    """
    report: dict[Path, str | None] = {}
    for entry in entries(root):
        report[entry] = check_entry(entry, checksums=True)
    if remove_damaged:
        for entry, problem in report.items():
            if problem is not None and entry.exists():
                with _build_lock(entry):
                    discard(entry)
        for parent in {root, *(entry.parent for entry in report)}:
            clean_stale(parent)
    return report
