"""A Ray cluster of several nodes on one machine, for tests and benchmarks, inside a private network namespace.

Run the caller under `unshare -n` (a network namespace of its own with only loopback): `LoopbackCluster`
refuses to start anywhere else, so no Ray port is ever reachable from outside this machine's loopback.
Nodes are started with `ray start` (no dashboard, token authentication, bound to 127.0.0.1) and
stopped by PID: every process in the namespace but the caller and its parents.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: Node death detected within ~2 s rather than Ray's default ~15-30 s (health checks of the GCS).
FAST_HEALTH_CHECKS = {
    "RAY_health_check_initial_delay_ms": "0",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "500",
    "RAY_health_check_failure_threshold": "3",
}


def only_loopback() -> bool:
    """Whether this process's network namespace has no interface but `lo` (read from /proc/self/net/dev,
    which is per namespace; /sys/class/net shows the namespace sysfs was mounted in)."""
    try:
        lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]
    except OSError:
        return False
    return [line.split(":", 1)[0].strip() for line in lines] == ["lo"]


def namespace_inode(pid: int | str = "self") -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def namespace_pids(inode: str) -> list[int]:
    """Processes (by PID) whose network namespace is `inode`."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and namespace_inode(entry) == inode:
            try:
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != "Z":  # a zombie is gone, waiting for its parent
                pids.append(int(entry))
    return pids


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return pids


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


class LoopbackCluster:
    """Ray nodes on 127.0.0.1: `nodes[0]` is the head; each node is {"num_cpus": n, "resources": {...}}.

    Use as a context manager; `env` holds the variables a driver needs (the token, RAY_ADDRESS).
    """

    def __init__(self, nodes: Sequence[Mapping[str, Any]], port: int | None = None, fast_health_checks: bool = True):
        if not only_loopback():
            raise RuntimeError(
                "LoopbackCluster runs only in a network namespace with nothing but loopback (run under `unshare -n`)"
            )
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        # `ray start --head` refuses a port whose address it finds in /tmp/ray and in the process table, both shared
        # with clusters in other namespaces of this machine: a random head port by default keeps them apart
        self.nodes, self.port = list(nodes), port or random.SystemRandom().randrange(40000, 50000)
        self.address = f"127.0.0.1:{self.port}"
        self.inode = namespace_inode()
        self.env = {
            **os.environ,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(16),
            "RAY_USAGE_STATS_ENABLED": "0",
            **(FAST_HEALTH_CHECKS if fast_health_checks else {}),
        }
        self.start_seconds: list[float] = []

    def __enter__(self) -> LoopbackCluster:
        os.environ.update({k: v for k, v in self.env.items() if k.startswith("RAY_")})
        if "ray" in sys.modules:  # Ray read its auth settings when imported: make this process read them again
            with contextlib.suppress(ImportError, AttributeError):
                from ray._raylet import AuthenticationTokenLoader, Config

                Config.initialize("")
                AuthenticationTokenLoader.instance().reset_cache()
        try:
            for i, node in enumerate(self.nodes):
                self._ray_start(node, head=i == 0)
        except BaseException:
            self.stop()
            raise
        os.environ["RAY_ADDRESS"] = self.address
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _ray_start(self, node: Mapping[str, Any], head: bool) -> None:
        ray = str(Path(sys.executable).with_name("ray"))
        head_flags = ["--head", "--port", str(self.port), "--include-dashboard=false"]
        where = head_flags if head else ["--address", self.address]
        command = [
            ray,
            "start",
            *where,
            "--node-ip-address",
            "127.0.0.1",
            "--num-cpus",
            str(node.get("num_cpus", 1)),
            "--resources",
            json.dumps(dict(node.get("resources", {}))),
            "--disable-usage-stats",
        ]
        started = time.perf_counter()
        out = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=180)
        if out.returncode != 0:
            raise RuntimeError(f"`{' '.join(command)}` failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        self.start_seconds.append(time.perf_counter() - started)

    def add_node(self, node: Mapping[str, Any]) -> None:
        """Start one more (non-head) node, e.g. in place of one `kill_node` took."""
        self._ray_start(node, head=False)
        self.nodes.append(node)

    def raylet_pid(self, resource: str) -> int:
        """The PID of the raylet of the node that has `resource`."""
        for pid in namespace_pids(self.inode):
            args = cmdline(pid)
            if args and Path(args[0]).name == "raylet" and any(resource in a for a in args):
                return pid
        raise LookupError(f"no raylet with resource {resource!r} in this namespace")

    def children(self, pid: int) -> list[int]:
        """The processes of the namespace whose parent is `pid` (a raylet's workers and agents)."""
        out = []
        for child in namespace_pids(self.inode):
            try:
                if int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(child)
            except (OSError, IndexError, ValueError):
                continue
        return out

    def kill_node(self, resource: str, timeout: float = 60.0) -> list[int]:
        """SIGKILL the raylet of the node that has `resource`; wait until its workers have exited (they end
        when their raylet is gone), as when a machine is lost. Returns the workers' PIDs."""
        raylet = self.raylet_pid(resource)
        workers = self.children(raylet)
        os.kill(raylet, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        while any(pid in namespace_pids(self.inode) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        return workers

    def processes(self) -> list[tuple[int, str]]:
        """Processes of the cluster: every one in the namespace but this process and its parents."""
        keep = _ancestors()
        out = []
        for pid in namespace_pids(self.inode):
            if pid not in keep:
                out.append((pid, " ".join(cmdline(pid))[:120]))
        return out

    def stop(self, grace: float = 5.0) -> list[tuple[int, str]]:
        """Stop every process of the cluster by PID (SIGTERM, then SIGKILL); returns those still left."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            for pid, _ in self.processes():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while self.processes() and time.monotonic() < deadline:
                time.sleep(0.1)
            if not self.processes():
                break
        return self.processes()
