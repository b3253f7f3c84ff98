"""Code archives (issue 40): deterministic packing, the secret filter, bounds, the store, and safe unpacking."""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
from pathlib import Path

import pytest

from rlcloud.codepack import (
    MAX_CODE_BYTES,
    archive_name,
    code_location,
    fetch,
    pack,
    pin,
    publish,
    secret_reason,
    unpack,
)
from rlcloud.errors import SpecError, WorkloadError
from rlcloud.runenv import RunnerEnv
from rlcloud.runner.code import code_folder
from rlcloud.specs import ExperimentSpec
from rlcloud.specs.code import CodeSpec
from rlcloud.storage import open_store

FILES = {
    "myenvs.py": b"class Corridor:\n    pass\n",
    "pkg/__init__.py": b"",
    "pkg/wrappers.py": b"SCALE = 2\n",
    "configs/level.json": b'{"width": 5}\n',
    "README.txt": b"my project\n",
}


def _project(root: Path, order: list[str], *, mode: int, mtime: int) -> Path:
    root.mkdir(parents=True)
    for rel in order:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(FILES[rel])
        path.chmod(mode)
        os.utime(path, (mtime, mtime))
    return root


def test_the_same_files_give_the_same_bytes_whatever_their_order_times_and_modes(tmp_path: Path) -> None:
    names = sorted(FILES)
    one = _project(tmp_path / "laptop", names, mode=0o644, mtime=1_000_000)
    two = _project(tmp_path / "desktop" / "elsewhere", names[::-1], mode=0o755, mtime=2_000_000_000)
    first, second = pack(CodeSpec(path=str(one))), pack(CodeSpec(path=str(two)))
    assert first.data == second.data
    assert first.digest == second.digest == "sha256:" + hashlib.sha256(first.data).hexdigest()
    assert [rel for rel, _size in first.files] == sorted(FILES)
    with tarfile.open(fileobj=io.BytesIO(first.data)) as tar:
        members = tar.getmembers()
    assert {(m.mtime, m.mode, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0o644, 0, 0, "", "")}
    (two / "pkg" / "wrappers.py").write_bytes(b"SCALE = 3\n")  # one byte of code: another archive
    assert pack(CodeSpec(path=str(two))).digest != first.digest


def test_include_and_exclude_patterns_choose_the_files(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", sorted(FILES), mode=0o644, mtime=0)
    only_python = pack(CodeSpec(path=str(root), include=["*.py"], exclude=["wrappers.py"]))
    assert [rel for rel, _ in only_python.files] == ["myenvs.py", "pkg/__init__.py"]
    no_pkg = pack(CodeSpec(path=str(root), exclude=["pkg", "configs/*"]))
    assert [rel for rel, _ in no_pkg.files] == ["README.txt", "myenvs.py"]
    with pytest.raises(SpecError, match="nothing to pack"):
        pack(CodeSpec(path=str(root), include=["*.ipynb"]))
    with pytest.raises(SpecError, match=r"code\.requirements"):
        pack(CodeSpec(path=str(root), requirements="requirements.txt"))


def test_nothing_secret_is_ever_packed(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", sorted(FILES), mode=0o644, mtime=0)
    secrets = {
        ".git/config": b"[core]\n",
        ".env": b"API_TOKEN=abc\n",
        "prod.env": b"API_TOKEN=abc\n",
        ".kube/config": b"apiVersion: v1\n",
        "venv/pyvenv.cfg": b"home = /usr/bin\n",
        "venv/lib/site.py": b"",
        "conda/conda-meta/history": b"",
        "pkg/__pycache__/wrappers.cpython-311.pyc": b"\x00",
        "rlcloud-results/run/spec.yaml": b"name: run\n",
        "server.pem": b"-----BEGIN CERTIFICATE-----\n",
        "kubeconfig": b"apiVersion: v1\n",
        "my-service-account.json": b"{}\n",
        "gcp-key.json": b"{}\n",
        "id_rsa": b"key\n",
        "notes/backup.txt": b"-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n",
        "configs/renamed.json": b'{"type": "service_account", "private_key": "x"}\n',
        "configs/adc.json": b'{"refresh_token": "x", "client_id": "y"}\n',
        "configs/cluster.yaml": b"apiVersion: v1\nkind: Config\nusers: []\n",
    }
    for rel, data in secrets.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (tmp_path / "outside.py").write_bytes(b"")
    (root / "link.py").symlink_to(tmp_path / "outside.py")  # a link may lead anywhere: never followed
    (root / "linked").symlink_to(tmp_path)
    archive = pack(CodeSpec(path=str(root), include=["*"]))
    assert [rel for rel, _ in archive.files] == sorted(FILES)
    with tarfile.open(fileobj=io.BytesIO(archive.data)) as tar:
        assert sorted(tar.getnames()) == sorted(FILES)
    left_out = dict(archive.left_out)
    # the files a user might expect to be packed are listed with why; whole tool folders are skipped silently
    for rel in ("prod.env", "server.pem", "kubeconfig", "my-service-account.json", "gcp-key.json", "id_rsa"):
        assert "key or credentials" in left_out[rel], rel
    assert left_out["notes/backup.txt"] == "holds a private key"
    assert "service-account" in left_out["configs/renamed.json"]
    assert "refresh token" in left_out["configs/adc.json"]
    assert left_out["configs/cluster.yaml"] == "looks like a kubeconfig"
    assert "link" in left_out["link.py"] and "link" in left_out["linked/"]
    assert secret_reason("a/.ssh/id") == "inside the hidden folder .ssh"


def test_a_project_over_the_bounds_is_refused_naming_its_largest_files(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", sorted(FILES), mode=0o644, mtime=0)
    with open(root / "replay.bin", "wb") as big:  # sparse: no disk or time spent
        big.truncate(MAX_CODE_BYTES + 1)
    with pytest.raises(SpecError) as caught:
        pack(CodeSpec(path=str(root)))
    message = str(caught.value)
    assert "replay.bin (64.0 MiB)" in message and "code.exclude" in message
    assert pack(CodeSpec(path=str(root), exclude=["*.bin"])).files  # what the message says to do works


def test_an_archive_is_stored_once_by_digest(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", sorted(FILES), mode=0o644, mtime=0)
    archive = pack(CodeSpec(path=str(root)))
    results = tmp_path / "results"
    store = open_store(code_location(str(results)))
    assert publish(archive, store) is True
    stored = store.stat(archive.name)
    assert stored is not None and stored.size == len(archive.data)
    assert publish(pack(CodeSpec(path=str(root))), store) is False  # unchanged: nothing uploaded
    assert store.stat(archive.name) == stored  # same generation: not rewritten
    assert archive.name == archive_name(archive.digest) == archive.digest.replace("sha256:", "sha256-") + ".tar"
    assert [info.name for info in store.list()] == [archive.name]


def test_the_runner_unpacks_the_named_archive_read_only(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", sorted(FILES), mode=0o644, mtime=0)
    spec = ExperimentSpec.from_dict(
        {"name": "c", "environment": {"type": "myenvs:Corridor"}, "agent": {"type": "ppo"}, "episodes": 1}
    )
    pinned, archive = pin(spec.model_copy(update={"code": CodeSpec(path=str(root))}))
    assert archive is not None and pinned.code is not None and pinned.code.digest == archive.digest
    location = code_location(str(tmp_path / "results"))
    publish(archive, open_store(location))
    # another archive planted in the code folder is never read: only the spec's digest is
    open_store(location).write_bytes("sha256-" + "0" * 64 + ".tar", b"not an archive")
    cache = tmp_path / "cache"
    folder = fetch(location, archive.digest, cache=cache)
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == sorted(FILES)
    assert (folder / "myenvs.py").read_bytes() == FILES["myenvs.py"]
    assert not os.access(folder / "myenvs.py", os.W_OK) or os.geteuid() == 0
    assert (folder / "pkg").stat().st_mode & 0o777 == 0o555
    assert list(cache.iterdir()) == [folder]  # no staging folder left behind
    assert fetch(location, archive.digest, cache=cache) == folder  # cached: not fetched again

    env = RunnerEnv(code_store=location, project_dir=str(tmp_path / "elsewhere"))
    os.environ["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    try:
        found = code_folder(pinned, env)
    finally:
        del os.environ["XDG_CACHE_HOME"]
    assert found is not None and (found / "myenvs.py").is_file()  # code: wins over the project folder
    assert code_folder(spec, env) == tmp_path / "elsewhere"  # without code: the project folder
    with pytest.raises(SpecError, match=r"code\.digest"):
        code_folder(spec.model_copy(update={"code": CodeSpec(path=str(root))}), env)


def test_a_tampered_archive_is_refused_and_nothing_is_unpacked(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", sorted(FILES), mode=0o644, mtime=0)
    archive = pack(CodeSpec(path=str(root)))
    location = code_location(str(tmp_path / "results"))
    store = open_store(location)
    tampered = archive.data.replace(b"SCALE = 2", b"SCALE = 9")
    store.write_bytes(archive.name, tampered)
    cache = tmp_path / "cache"
    with pytest.raises(WorkloadError, match=f"not the spec of record's {archive.digest}"):
        fetch(location, archive.digest, cache=cache)
    assert not cache.exists() or not any(cache.iterdir())
    store.delete(archive.name)
    with pytest.raises(WorkloadError, match="does not exist"):
        fetch(location, archive.digest, cache=cache)


def _tar(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


@pytest.mark.parametrize("name", ["../escape.py", "/etc/escape.py", "a/../../escape.py"])
def test_an_entry_leaving_the_folder_is_refused_even_with_a_matching_digest(tmp_path: Path, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.size = 2
    data = _tar((info, b"x\n"))
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    with pytest.raises(WorkloadError, match="would leave its folder"):
        unpack(data, digest, tmp_path / "cache" / "d")
    assert not (tmp_path / "escape.py").exists() and not (tmp_path / "cache" / "d").exists()


def test_links_and_devices_in_an_archive_are_refused(tmp_path: Path) -> None:
    link = tarfile.TarInfo("env.py")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    data = _tar((link, b""))
    with pytest.raises(WorkloadError, match="not a regular file"):
        unpack(data, "sha256:" + hashlib.sha256(data).hexdigest(), tmp_path / "d")
    assert not (tmp_path / "d").exists()


def test_code_is_a_folder_or_a_mapping_and_its_path_follows_the_spec_file(tmp_path: Path) -> None:
    (tmp_path / "exp.yaml").write_text(
        "name: c\nenvironment: {type: 'myenvs:Corridor'}\nagent: {type: ppo}\nepisodes: 1\ncode: .\n"
    )
    spec = ExperimentSpec.from_file(tmp_path / "exp.yaml")
    assert spec.code == CodeSpec(path=str(tmp_path.resolve()))
    with pytest.raises(SpecError, match="code.digest"):
        ExperimentSpec.from_dict({**spec.model_dump(), "code": {"path": ".", "digest": "md5:abc"}})
    with pytest.raises(SpecError, match="code.requirements"):
        ExperimentSpec.from_dict({**spec.model_dump(), "code": {"path": ".", "requirements": "../r.txt"}})
    assert sys.modules.get("myenvs") is None  # a spec is data: loading it imports nothing
