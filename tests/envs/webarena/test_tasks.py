"""WebArena task configs: loading a directory, splits, placeholders from WebArena's variables; the bundled set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgym_envs.webarena.tasks.catalog import Task, TaskCatalog, TaskConfigError, site_urls_from_environment


def raw_config(task_id: int, **extra: object) -> dict:
    return {
        "sites": ["shopping_admin"],
        "task_id": task_id,
        "require_login": True,
        "storage_state": "./.auth/shopping_admin_state.json",
        "start_url": "__SHOPPING_ADMIN__",
        "geolocation": None,
        "intent": f"task {task_id}",
        "eval": {
            "eval_types": ["url_match"],
            "reference_answers": None,
            "reference_url": "__SHOPPING_ADMIN__/sales/order/ |OR| __SHOPPING__/orders",
            "program_html": [],
        },
        **extra,
    }


def test_a_raw_list_file_and_single_files_load_into_the_test_split(tmp_path: Path) -> None:
    (tmp_path / "test.raw.json").write_text(json.dumps([raw_config(0), raw_config(2)]))
    (tmp_path / "10.json").write_text(json.dumps(raw_config(10)))
    catalog = TaskCatalog.from_directory(tmp_path)
    assert catalog.splits == ("test",)
    assert [t.task_id for t in catalog.by_split["test"]] == ["0", "2", "10"]  # numeric order
    assert catalog.by_id["2"].category == "shopping_admin"


def test_webarenas_own_config_files_after_generate_test_data_load_as_webarena_runs_them(tmp_path: Path) -> None:
    # generate_test_data.py: test.raw.json (placeholders) -> test.json and N.json (URLs filled in).
    raw = [raw_config(i) for i in range(3)]
    (tmp_path / "test.raw.json").write_text(json.dumps(raw))
    filled = json.loads(json.dumps(raw).replace("__SHOPPING_ADMIN__", "http://host:7780/admin"))
    filled = json.loads(json.dumps(filled).replace("__SHOPPING__", "http://host:7770"))
    (tmp_path / "test.json").write_text(json.dumps(filled))
    for config in filled:
        (tmp_path / f"{config['task_id']}.json").write_text(json.dumps(config))
    catalog = TaskCatalog.from_directory(tmp_path)
    assert [t.task_id for t in catalog.by_split["test"]] == ["0", "1", "2"]
    assert [t.source.name for t in catalog.by_split["test"]] == ["0.json", "1.json", "2.json"]  # what run.py reads
    assert catalog.by_id["1"].config["start_url"] == "http://host:7780/admin"

    for n in range(3):  # without the per-task files: test.json's URLs, not the raw placeholders
        (tmp_path / f"{n}.json").unlink()
    catalog = TaskCatalog.from_directory(tmp_path)
    assert {t.source.name for t in catalog.by_id.values()} == {"test.json"} and len(catalog.by_id) == 3

    (tmp_path / "copy.json").write_text(json.dumps(filled[:1]))  # two lists with task 0: still an error
    with pytest.raises(TaskConfigError, match=r"task_id 0 appears twice \(.*copy.json and .*test.json\)"):
        TaskCatalog.from_directory(tmp_path)


def test_split_directories_make_splits(tmp_path: Path) -> None:
    for split, ids in (("train", [1, 2]), ("test", [3])):
        (tmp_path / split).mkdir()
        (tmp_path / split / "tasks.json").write_text(json.dumps([raw_config(i) for i in ids]))
    catalog = TaskCatalog.from_directory(tmp_path)
    assert catalog.splits == ("train", "test")
    assert [t.task_id for t in catalog.by_split["train"]] == ["1", "2"]


def test_placeholders_resolve_from_webarena_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOPPING_ADMIN", "http://host:7780/admin/")
    monkeypatch.setenv("SHOPPING", "http://host:7770")
    monkeypatch.delenv("GITLAB", raising=False)
    urls = site_urls_from_environment()
    assert urls["shopping_admin"] == "http://host:7780/admin/" and "gitlab" not in urls
    resolved = Task("0", "test", raw_config(0, start_url="__SHOPPING_ADMIN__ |AND| __SHOPPING__/cart")).resolve(urls)
    assert resolved.start_urls == ["http://host:7780/admin", "http://host:7770/cart"]  # |AND| opens two tabs
    assert resolved.eval["reference_url"] == "http://host:7780/admin/sales/order/ |OR| http://host:7770/orders"
    gitlab = Task("1", "test", {**raw_config(1), "start_url": "__GITLAB__/explore"})
    with pytest.raises(TaskConfigError, match="set the GITLAB environment variable"):
        gitlab.resolve(urls)
    assert gitlab.resolve({**urls, "gitlab": "http://g:8023"}).start_urls == ["http://g:8023/explore"]


def test_login_state_is_found_next_to_the_configs_or_reported(tmp_path: Path) -> None:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "0.json").write_text(json.dumps(raw_config(0)))
    task = TaskCatalog.from_directory(tmp_path / "configs").by_id["0"]
    with pytest.raises(TaskConfigError, match="auto_login"):
        task.storage_state_path()
    (tmp_path / ".auth").mkdir()
    (tmp_path / ".auth" / "shopping_admin_state.json").write_text("{}")
    assert task.storage_state_path() == tmp_path / ".auth" / "shopping_admin_state.json"  # next to configs/


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"task_id": 1}), "lacks"),
        (json.dumps(raw_config(1, eval={"eval_types": ["screenshot_match"]})), "eval_types must be"),
        (json.dumps([raw_config(1), raw_config(1)]), "appears twice"),
    ],
)
def test_malformed_configs_are_reported_with_their_file(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "bad.json").write_text(content)
    with pytest.raises(TaskConfigError, match=message):
        TaskCatalog.from_directory(tmp_path)


def test_missing_or_empty_directories_are_reported(tmp_path: Path) -> None:
    with pytest.raises(TaskConfigError, match="does not exist"):
        TaskCatalog.from_directory(tmp_path / "nope")
    with pytest.raises(TaskConfigError, match="no WebArena task configs"):
        TaskCatalog.from_directory(tmp_path)


def test_bundled_tasks_cover_every_evaluator_and_state_changes() -> None:
    catalog = TaskCatalog.bundled()
    tasks = [task for task in catalog.by_id.values() if task.source is not None]  # the hand-written configs
    assert len(tasks) >= 12 and catalog.splits == ("train", "test")
    kinds = {kind for task in tasks for kind in task.eval["eval_types"]}
    assert kinds == {"string_match", "url_match", "program_html"}
    answers = {kind for task in tasks for kind in (task.eval.get("reference_answers") or {})}
    assert answers == {"exact_match", "must_include"}  # bundled tasks score without a judge (no fuzzy_match)
    state_changing = [t for t in tasks if "program_html" in t.eval["eval_types"]]
    assert len(state_changing) >= 4 and all(t.config["require_reset"] for t in state_changing)
    for split in catalog.splits:  # each split exercises all three evaluators
        assert {k for t in tasks if t.split == split for k in t.eval["eval_types"]} == kinds
    assert {task.category for task in tasks} == {"shopping"}
    assert all(task.expert_plan and task.config["start_url"] == "__SHOPPING__" for task in tasks)
