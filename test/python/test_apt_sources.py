"""The Debian archive comes from the system's apt sources; no mirror is named in the tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mlbridge._apt import MIRROR_ENV, AptSourcesError, debian_archive_uri, read_apt_sources

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MIRROR_ENV, raising=False)


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def os_release(tmp_path: Path, codename: str | None) -> Path:
    path = tmp_path / "os-release"
    path.write_text("ID=debian\n" + (f"VERSION_CODENAME={codename}\n" if codename else ""))
    return path


def test_the_release_archive_of_a_deb822_file_wins_over_security_listed_first(tmp_path: Path):
    write(tmp_path, "apt/sources.list.d/debian.sources", """\
Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main

Types: deb deb-src
# a comment inside a stanza
URIs: http://mirror.example/debian/
Suites: bookworm bookworm-updates
Components: main contrib
""")  # fmt: skip
    uri = debian_archive_uri(tmp_path / "apt", os_release(tmp_path, "bookworm"))
    assert uri == "http://mirror.example/debian"


def test_one_line_sources_with_options_are_read(tmp_path: Path):
    line = "deb [arch=amd64 signed-by=/k.gpg] http://m.example/debian bookworm main"
    write(tmp_path, "apt/sources.list", f"# comment\n{line}\n")
    uri = debian_archive_uri(tmp_path / "apt", os_release(tmp_path, "bookworm"))
    assert uri == "http://m.example/debian"


def test_disabled_stanzas_files_and_other_releases_are_skipped(tmp_path: Path):
    write(tmp_path, "apt/sources.list.d/off.sources",
          "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n"
          "Components: main\n")  # fmt: skip
    write(tmp_path, "apt/sources.list.d/x.list.disabled",
          "deb http://disabled.example/debian bookworm main\n")  # fmt: skip
    write(tmp_path, "apt/sources.list.d/z.list",
          "deb http://other.example/apt cloud-sdk main\n"
          "deb http://on.example/debian bookworm main\n")  # fmt: skip
    assert [e.uri for e in read_apt_sources(tmp_path / "apt")] == [
        "http://other.example/apt",
        "http://on.example/debian",
    ]
    uri = debian_archive_uri(tmp_path / "apt", os_release(tmp_path, "bookworm"))
    assert uri == "http://on.example/debian"


def test_no_qualifying_source_is_an_error_naming_the_variable(tmp_path: Path):
    write(tmp_path, "apt/sources.list", "deb http://m.example/debian bookworm-security main\n")
    with pytest.raises(AptSourcesError, match=f"release 'bookworm'.*\\${MIRROR_ENV}"):
        debian_archive_uri(tmp_path / "apt", os_release(tmp_path, "bookworm"))


def test_the_variable_overrides_the_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(MIRROR_ENV, "http://local.example/debian/")
    assert debian_archive_uri(tmp_path / "none", tmp_path / "none") == "http://local.example/debian"


def test_the_setup_runs_it_with_the_system_python_before_mlbridge_is_installed():
    proc = subprocess.run(
        ["python3", "-I", str(REPO / "mlbridge" / "_apt.py")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == debian_archive_uri()


#: Package registries and mirrors: their addresses come from the system's configuration.
REGISTRY_HOSTS = (
    "deb.debian.org",
    "ftp.debian.org",
    "security.debian.org",
    "snapshot.debian.org",
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "download.pytorch.org",
)


def test_no_package_registry_address_is_written_in_the_tree():
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    found = []
    for name in filter(None, listed):
        path = REPO / name.decode()
        if not path.is_file() or path.suffix in (".png", ".onnx", ".bc", ".so"):
            continue
        text = path.read_bytes()
        # This file names them to look for them.
        if path.name == Path(__file__).name:
            continue
        found += [f"{name.decode()}: {h}" for h in REGISTRY_HOSTS if h.encode() in text]
    assert found == []
