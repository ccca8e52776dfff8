"""Where the bundled data is found: beside the clone or a parent folder of it, or beside the folder the clone was
cloned from (a clone in a temporary folder), or where ``TRAJPUB_SHARED_DATA`` says; never a fixed path."""

from __future__ import annotations

from pathlib import Path

from trajpub import config


def clone_at(folder: Path, origin_url: str | None) -> Path:
    (folder / ".git").mkdir(parents=True)
    if origin_url is not None:
        (folder / ".git" / "config").write_text(f'[core]\n\tbare = false\n[remote "origin"]\n\turl = {origin_url}\n'
                                                '\tfetch = +refs/heads/*:refs/remotes/origin/*\n')
    return folder


def test_data_beside_a_parent_folder_of_the_clone(tmp_path, monkeypatch):
    (tmp_path / "shared" / "data").mkdir(parents=True)
    monkeypatch.setattr(config, "PROJECT_ROOT", clone_at(tmp_path / "team" / "main", None))
    monkeypatch.delenv("TRAJPUB_SHARED_DATA", raising=False)
    assert config._shared_data_dir() == tmp_path / "shared" / "data"


def test_data_beside_the_folder_a_clone_elsewhere_came_from(tmp_path, monkeypatch):
    work, scratch = tmp_path / "work", tmp_path / "scratch"
    (work / "shared" / "data").mkdir(parents=True)
    (work / "main").mkdir()
    monkeypatch.setattr(config, "PROJECT_ROOT", clone_at(scratch / "fresh", str(work / "main")))
    monkeypatch.delenv("TRAJPUB_SHARED_DATA", raising=False)
    assert config._shared_data_dir() == work / "shared" / "data"
    # a remote URL is not a folder of this machine: the clone's sibling is named (the readers say it is missing)
    monkeypatch.setattr(config, "PROJECT_ROOT", clone_at(scratch / "other", "https://example.org/trajpub.git"))
    assert config._shared_data_dir() == scratch / "shared" / "data"


def test_the_environment_variable_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAJPUB_SHARED_DATA", str(tmp_path / "mine"))
    assert config._shared_data_dir() == tmp_path / "mine"
