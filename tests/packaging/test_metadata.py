"""Every distribution is publishable: a LICENSE, a real readme, full metadata, version
ranges between the distributions, and declared Triton and torch bounds that are the
versions tox.ini tests (so what is declared is what passes)."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")
from packaging.requirements import Requirement  # noqa: E402
from packaging.version import Version  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = [ROOT, ROOT / "tritonjit_core", ROOT / "operators", *sorted((ROOT / "plugins").glob("tritonjit-*"))]
PLACEHOLDER = "https://github.com/REPLACE-WITH-OWNER/tritonjit"


def _project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text())["project"]


def _requirements(project: dict) -> list[Requirement]:
    reqs = [Requirement(r) for r in project.get("dependencies", [])]
    for extra in project.get("optional-dependencies", {}).values():
        reqs += [Requirement(r) for r in extra]
    return reqs


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name or "root")
def test_license_readme_and_metadata(folder):
    project = _project(folder)
    assert (folder / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()
    assert "Copyright (c)" in (ROOT / "LICENSE").read_text() and "the tritonjit authors" in (ROOT / "LICENSE").read_text()
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    readme = folder / project["readme"]
    assert len(readme.read_text().splitlines()) > 10, f"{readme} is no real readme"
    assert project["requires-python"] == ">=3.10"
    classifiers = project["classifiers"]
    for v in ("3.10", "3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {v}" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # the SPDX expression says it
    urls = project["urls"]
    assert {"Homepage", "Source", "Issues", "Documentation"} <= set(urls)
    assert all(u.startswith(PLACEHOLDER) for u in urls.values()), urls


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda f: f.name or "root")
def test_no_machine_paths_or_index_hosts(folder):
    text = (folder / "pyproject.toml").read_text()
    for bad in ("/work/", "/root/", "/opt/", "/tmp/", "file://", "pythonhosted", "pypi.org", "download.pytorch"):
        assert bad not in text, bad


def test_distributions_depend_on_each_other_by_minor_version_ranges():
    versions = {_project(f)["name"]: Version(_project(f)["version"]) for f in FOLDERS}
    for folder in FOLDERS:
        for req in _requirements(_project(folder)):
            if req.name.startswith("tritonjit"):
                mine = versions[req.name]
                assert str(req.specifier) == f"<{mine.major}.{mine.minor + 1},>={mine.major}.{mine.minor}", (folder, req)
                assert mine in req.specifier


def _tox() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "tox.ini")
    return cfg


def _pin(env: str, package: str) -> Version:
    (line,) = [d.strip() for d in _tox()[f"testenv:{env}"]["deps"].splitlines() if d.strip().startswith(package + "==")]
    return Version(line.split("==")[1])


def _bounds(folder: Path, name: str) -> tuple[Version, Version | None]:
    (req,) = [r for r in _requirements(_project(folder)) if r.name == name]
    lower = Version(re.search(r">=([\d.]+)", str(req.specifier)).group(1))
    upper = re.search(r"<([\d.]+)", str(req.specifier))
    return lower, Version(upper.group(1)) if upper else None


def test_the_triton_bounds_are_the_tested_versions():
    """The core: triton-oldest tests the lower bound, triton-latest the newest minor
    release the upper bound admits; the operators: torch-oldest-ops tests theirs."""
    lower, upper = _bounds(ROOT / "tritonjit_core", "triton")
    latest = _pin("triton-latest", "triton")
    assert _pin("triton-oldest", "triton") == lower
    assert upper == Version(f"{latest.major}.{latest.minor + 1}"), "the upper bound admits the newest tested minor only"
    ops_lower, ops_upper = _bounds(ROOT / "operators", "triton")
    assert _pin("torch-oldest-ops", "triton") == ops_lower and ops_upper == upper


def test_the_torch_bounds_are_the_tested_versions():
    oldest, oldest_ops = _pin("torch-oldest", "torch"), _pin("torch-oldest-ops", "torch")
    for folder in (ROOT / "tritonjit_core", ROOT / "plugins" / "tritonjit-cuda"):
        assert _bounds(folder, "torch") == (Version(f"{oldest.major}.{oldest.minor}"), None)
    assert _bounds(ROOT / "operators", "torch") == (Version(f"{oldest_ops.major}.{oldest_ops.minor}"), None)
    # each oldest torch runs with a Triton inside the declared range
    assert _pin("torch-oldest", "triton") >= _bounds(ROOT / "tritonjit_core", "triton")[0]


def test_cibuildwheel_builds_cpython_310_to_313_for_the_c_distributions():
    for folder in (ROOT / "tritonjit_core", ROOT / "plugins" / "tritonjit-cuda"):
        cfg = tomllib.loads((folder / "pyproject.toml").read_text())["tool"]["cibuildwheel"]
        assert cfg["build"] == ["cp310-*", "cp311-*", "cp312-*", "cp313-*"]
        assert (folder / "setup.py").exists()
    workflow = (ROOT / ".github" / "workflows" / "release.yml").read_text()
    assert "pypa/cibuildwheel" in workflow and "tritonjit_core" in workflow and "plugins/tritonjit-cuda" in workflow
