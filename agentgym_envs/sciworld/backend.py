"""One ScienceWorld JVM, owned by one Python object: start, raw calls, death detection, shutdown.

ScienceWorld is a Scala simulator; the `scienceworld` package ships it as a jar and drives it
through py4j. Its `ScienceWorldEnv` launches the JVM with the default heap (1.6-2.6 GB resident
after a while) and computes look, inventory and the full valid-action list on every step. This
module starts the same jar itself, so that:

- the heap is bounded (`-Xmx512m` by default) and the JVM's chatter (the simulator prints debug
  lines on every step, Java prints "Picked up JAVA_TOOL_OPTIONS") never reaches our stdout: the
  JVM's `System.out` is replaced by a null stream, and its stderr goes to a temporary file that
  is read back only to explain a failure;
- identity hash codes are constant (`-XX:hashCode=2`, when `deterministic`): the simulator keeps
  objects in hash sets ordered by identity hash, so without this the order of objects in a room,
  and even the simulated dynamics (a thermometer reading, how many bees hatch), differ from one
  JVM, or one load, to the next;
- the JVM dies with us: py4j's `--die-on-broken-pipe` makes it exit when its stdin closes, which
  happens on `close()`, on garbage collection, at interpreter exit and when the Python process is
  killed outright;
- a dead or hung JVM is reported as `SciWorldBackendError`, with the exit status and the tail of
  its stderr, and the owner can start a fresh one.

The JVM runs py4j's `GatewayServer`; we speak its line protocol over one socket ourselves rather
than through py4j's Python client, which costs more per call and, on a broken connection, logs
through (and thereby configures) the root logger. Nothing here holds a global lock: any number of
JVMs start in parallel.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from py4j.protocol import escape_new_line, unescape_new_line

from agentgym_envs.clientargs import check_number

#: Marks our JVMs on their command line as `-Dagentgym.sciworld.owner=<python pid>`.
OWNER_PROPERTY = "agentgym.sciworld.owner"
#: JVM options that make identity hash codes constant, hence the simulator deterministic.
DETERMINISTIC_OPTIONS = ("-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2")
_STARTUP_TIMEOUT_S = 60.0
_INTERFACE = "scienceworld.runtime.pythonapi.PythonInterface"


class SciWorldBackendError(RuntimeError):
    """The ScienceWorld JVM died, hung, failed a call or could not start; `reset()` starts afresh."""


class JavaRef(str):
    """A py4j object id (`o12`): a Java object the gateway holds for us."""


def java_executable(java: str | None = None) -> str:
    """The `java` to run: `java` if given, else `$JAVA_HOME/bin/java`, else `java` on the PATH."""
    if java is None:
        home = os.environ.get("JAVA_HOME")
        java = str(Path(home) / "bin" / "java") if home else "java"
    found = shutil.which(java)
    if found is None:
        raise SciWorldBackendError(
            f"cannot find Java ({java!r}): ScienceWorld needs a Java 11+ runtime (e.g. `apt install "
            "openjdk-17-jre-headless`); put `java` on the PATH, set JAVA_HOME, or pass java='/path/to/java'"
        )
    return found


def live_jvms(owner: int | None = None) -> list[int]:
    """Pids of the running ScienceWorld JVMs started by process `owner` (default: this process)."""
    marker = f"-D{OWNER_PROPERTY}={os.getpid() if owner is None else owner}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # the process ended while we looked
            continue
        if marker in args and state != "Z":
            pids.append(int(entry.name))
    return pids


def _encode(value: Any) -> str:
    """One argument in py4j's protocol."""
    if isinstance(value, JavaRef):
        return f"r{value}"
    if isinstance(value, str):
        return "s" + escape_new_line(value)
    if isinstance(value, bool):
        return "btrue" if value else "bfalse"
    if isinstance(value, int):
        return f"i{value}"
    raise TypeError(f"cannot send {type(value).__name__} to the JVM")


def _stop(process: subprocess.Popen, sock: socket.socket | None, stderr: Any) -> None:
    """End the JVM: close our socket and the JVM's stdin (it exits on EOF), then kill if needed."""
    if sock is not None:
        sock.close()
    with contextlib.suppress(OSError):
        process.stdin.close()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    with contextlib.suppress(OSError):
        process.stdout.close()
    stderr.close()


class ScienceWorldJVM:
    """A ScienceWorld simulator in its own JVM, started by `start()` or the first call.

    Args:
        heap: The JVM's maximum heap (`-Xmx`), e.g. `"512m"`; None leaves the JVM's default.
        deterministic: Constant identity hash codes (see the module docstring): the same task and
            actions always give the same observations, at the cost of slower simulator steps.
        java_options: Extra JVM options, appended last.
        java: The `java` executable (default: `$JAVA_HOME/bin/java` or `java` on the PATH).
        timeout_s: How long one call may take before the JVM is considered hung and killed.

    `call(name, *args)` invokes a method of ScienceWorld's `PythonInterface` (`load`, `step`,
    `getScore`, `freeActionLook`, ...) and returns its str/int/float/bool result; `call_list` does
    the same for methods that return a list of strings.
    """

    def __init__(
        self,
        heap: str | None = "512m",
        deterministic: bool = True,
        java_options: Sequence[str] = (),
        java: str | None = None,
        timeout_s: float = 120.0,
    ):
        if heap is not None and (not isinstance(heap, str) or not re.fullmatch(r"[1-9][0-9]{0,12}[kKmMgG]?", heap)):
            raise ValueError(f"heap must be a JVM size such as '512m' or '2g' (-Xmx), or None, got {heap!r:.80}")
        if isinstance(java_options, str) or any(not isinstance(o, str) or not o.startswith("-") for o in java_options):
            raise ValueError(
                f"java_options must be a list of JVM options each starting with '-', got {java_options!r:.200}"
            )
        if java is not None and not isinstance(java, (str, os.PathLike)):
            raise TypeError(f"java must be the path of a java executable, got {type(java).__name__}")
        self.heap = heap
        self.deterministic = bool(deterministic)
        self.java_options = tuple(java_options)
        self.java = java
        self.timeout_s = check_number("timeout_s", timeout_s, 0.1, 86_400)
        self._process: subprocess.Popen | None = None
        self._socket: socket.socket | None = None
        self._reader: Any = None
        self._stderr: Any = None
        self._server: JavaRef | None = None
        self._finalizer: weakref.finalize | None = None

    # ---- lifecycle ------------------------------------------------------------------------------
    def command(self) -> list[str]:
        """The command line that starts the JVM."""
        from py4j.java_gateway import find_jar_path
        from scienceworld.constants import JAR_PATH

        options = [f"-Xmx{self.heap}"] if self.heap else []
        if not any(o.startswith("-XX:+Use") and o.endswith("GC") for o in self.java_options):
            options.append("-XX:+UseSerialGC")  # one simulator thread, a small heap: the leanest collector
        options.append("-XX:+DisplayVMOutputToStderr")
        if self.deterministic:
            options += DETERMINISTIC_OPTIONS
        options += [f"-D{OWNER_PROPERTY}={os.getpid()}", *self.java_options]
        classpath = os.pathsep.join([find_jar_path(), JAR_PATH])
        return [
            java_executable(self.java),
            *options,
            "-cp",
            classpath,
            "py4j.GatewayServer",
            "--die-on-broken-pipe",
            "0",
        ]

    @property
    def pid(self) -> int | None:
        """The JVM's process id (None when not started)."""
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def started(self) -> bool:
        """Started and not closed since (it may have died in the meantime: see `alive`)."""
        return self._server is not None

    def start(self) -> None:
        """Start the JVM unless it is running; a dead one is cleaned up and replaced."""
        if self.alive:
            return
        self.close()
        from scienceworld.constants import BASEPATH

        stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the JVM; closed by _stop)
        process = subprocess.Popen(
            self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, cwd=BASEPATH
        )
        self._process, self._stderr = process, stderr
        try:
            port = self._read_port()
            # start-up (loading the simulator) may be slow on a busy machine: timeout_s bounds calls after it
            startup = max(self.timeout_s, _STARTUP_TIMEOUT_S)
            self._socket = socket.create_connection(("127.0.0.1", port), timeout=startup)
            self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._reader = self._socket.makefile("rb")
            # Silence the simulator's per-step debug printing before any Scala code runs (Scala's
            # Console captures System.out when first used), and stop reading the pipe.
            null = self._command("c\nz:java.io.OutputStream\nnullOutputStream\ne\n")
            stream = self._command(f"i\njava.io.PrintStream\nr{null}\ne\n")
            self._command(f"c\nz:java.lang.System\nsetOut\nr{stream}\ne\n")
            process.stdout.close()
            self._server = self._command(f"i\n{_INTERFACE}\ne\n")
            self._socket.settimeout(self.timeout_s)
        except BaseException:
            _stop(process, self._socket, stderr)
            self._process = self._socket = self._reader = self._stderr = None
            raise
        self._finalizer = weakref.finalize(self, _stop, process, self._socket, stderr)

    def _read_port(self) -> int:
        """py4j's GatewayServer prints its port as the first line on stdout."""
        assert self._process is not None
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._process.stdout], [], [], left)[0]:
                raise SciWorldBackendError(f"the ScienceWorld JVM did not start within {_STARTUP_TIMEOUT_S:.0f} s")
            chunk = os.read(self._process.stdout.fileno(), 64)
            if not chunk:
                self._process.wait()
                raise SciWorldBackendError(
                    f"the ScienceWorld JVM exited at startup with status {self._process.returncode}: "
                    f"{self._stderr_tail()}\ncommand: {' '.join(self.command())}"
                )
            line += chunk
        return int(line)

    def close(self) -> None:
        """End the JVM (safe to call twice, and on a JVM that already died)."""
        if self._finalizer is not None:
            self._finalizer()
        self._process = self._socket = self._reader = self._stderr = self._server = self._finalizer = None

    # ---- calls ----------------------------------------------------------------------------------
    def call(self, name: str, *args: Any) -> Any:
        """`PythonInterface.<name>(*args)` in the JVM (started if needed); its str/int/float/bool result."""
        if self._server is None:
            self.start()
        parts = "".join(_encode(arg) + "\n" for arg in args)
        return self._command(f"c\n{self._server}\n{name}\n{parts}e\n", name, args)

    def call_list(self, name: str, *args: Any) -> list[str]:
        """`PythonInterface.<name>(*args)` for a method that returns a list of strings."""
        ref = self.call(name, *args)
        text = self._command(f"c\nz:java.lang.String\njoin\ns\\n\nr{ref}\ne\n", name, args)
        self._command(f"m\nd\n{ref}\ne\n")
        return text.split("\n") if text else []

    def _command(self, command: str, name: str = "", args: tuple = ()) -> Any:
        """Send one py4j command and decode its answer; failures raise `SciWorldBackendError`."""
        assert self._socket is not None and self._reader is not None
        try:
            self._socket.sendall(command.encode("utf-8", "replace"))
            answer = self._reader.readline().decode("utf-8")
        except TimeoutError as error:
            raise self._failure(name, args, timed_out=True) from error
        except OSError as error:  # a reset connection
            raise self._failure(name, args) from error
        if not answer:
            raise self._failure(name, args)
        status, kind, value = answer[1], answer[2], answer[3:].rstrip("\n")
        if status == "y":
            if kind == "s":
                return unescape_new_line(value)
            if kind in "iL":
                return int(value)
            if kind == "d":
                return float(value)
            if kind == "b":
                return value == "true"
            if kind in "vn":
                return None
            return JavaRef(value)  # an object ("ro3" -> "o3") or a list ("lo4" -> "o4")
        if kind == "r":  # a Java exception: fetch its text, then let the gateway forget it
            message = self._command(f"c\n{value}\ntoString\ne\n")
            self._command(f"m\nd\n{value}\ne\n")
        else:
            message = unescape_new_line(value).splitlines()[0]
        shown = ", ".join(repr(a)[:60] for a in args)
        raise SciWorldBackendError(f"ScienceWorld raised {message} in {name}({shown}); call reset() to start over")

    def _failure(self, name: str, args: tuple, timed_out: bool = False) -> SciWorldBackendError:
        """Describe why the connection failed; a JVM that still runs has hung and is killed."""
        assert self._process is not None
        process = self._process
        shown = ", ".join(repr(a)[:60] for a in args)
        if not timed_out:  # the socket closes while a killed JVM is still exiting: let it finish
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
        if process.poll() is None:
            process.kill()
            process.wait()
            what = (
                f"did not answer {name}({shown}) within {self._socket.gettimeout():g} s and was killed"
                if timed_out
                else f"closed its connection during {name}({shown}) and was killed"
            )
        else:
            what = f"died during {name}({shown}) with exit status {process.returncode}"
        tail = self._stderr_tail()
        self.close()
        detail = f"; its stderr ends with: {tail}" if tail else ""
        return SciWorldBackendError(
            f"the ScienceWorld JVM (pid {process.pid}) {what}{detail}. Call reset() to start a fresh JVM."
        )

    def _stderr_tail(self, size: int = 1500) -> str:
        """The end of the JVM's stderr, one line per ` | `, without Java's 'Picked up ...' notes."""
        stderr = self._stderr
        stderr.seek(max(0, os.fstat(stderr.fileno()).st_size - size))
        lines = stderr.read().decode("utf-8", "replace").splitlines()
        return " | ".join(line for line in lines if line.strip() and not line.startswith("Picked up "))
