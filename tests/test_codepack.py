"""Code archives (issue 40): deterministic packing, the secret filter, bounds, the store, and safe unpacking."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

from rlcloud import Experiment, Sweep, SweepSpec
from rlcloud.cli import main
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
from rlcloud.k8s.builders import build_workloads
from rlcloud.k8s.sweep_builders import build_sweep_workloads
from rlcloud.local.machine import code_env
from rlcloud.record import (
    check_resume,
    create_record,
    read_history,
    record_in_force,
    start_recorded,
    start_sweep_recorded,
)
from rlcloud.runenv import RunnerEnv
from rlcloud.runner.code import code_folder
from rlcloud.runner.envs import make_env
from rlcloud.specs import ExperimentSpec
from rlcloud.specs.code import CodeSpec
from rlcloud.specs.identity import ChangedRunError, ChangedSweepError, diff_specs, fingerprint, split_changes
from rlcloud.storage import open_store
from rlcloud.validation import validate_file
from tests.fakes.gcs import FakeGcsServer

FILES = {
    "myenvs_packed.py": b"class Corridor:\n    pass\n",
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
    assert [rel for rel, _ in only_python.files] == ["myenvs_packed.py", "pkg/__init__.py"]
    no_pkg = pack(CodeSpec(path=str(root), exclude=["pkg", "configs/*"]))
    assert [rel for rel, _ in no_pkg.files] == ["README.txt", "myenvs_packed.py"]
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
        {"name": "c", "environment": {"type": "myenvs_packed:Corridor"}, "agent": {"type": "ppo"}, "episodes": 1}
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
    assert (folder / "myenvs_packed.py").read_bytes() == FILES["myenvs_packed.py"]
    assert not os.access(folder / "myenvs_packed.py", os.W_OK) or os.geteuid() == 0
    assert (folder / "pkg").stat().st_mode & 0o777 == 0o555
    assert list(cache.iterdir()) == [folder]  # no staging folder left behind
    assert fetch(location, archive.digest, cache=cache) == folder  # cached: not fetched again

    env = RunnerEnv(code_store=location, project_dir=str(tmp_path / "elsewhere"))
    with pytest.MonkeyPatch.context() as patched:  # the suite's own XDG_CACHE_HOME comes back afterwards
        patched.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        found = code_folder(pinned, env)
    assert found is not None and (found / "myenvs_packed.py").is_file()  # code: wins over the project folder
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
        "name: c\nenvironment: {type: 'myenvs_packed:Corridor'}\nagent: {type: ppo}\nepisodes: 1\ncode: .\n"
    )
    spec = ExperimentSpec.from_file(tmp_path / "exp.yaml")
    assert spec.code == CodeSpec(path=str(tmp_path.resolve()))
    with pytest.raises(SpecError, match=r"code\.digest"):
        ExperimentSpec.from_dict({**spec.model_dump(), "code": {"path": ".", "digest": "md5:abc"}})
    with pytest.raises(SpecError, match=r"code\.requirements"):
        ExperimentSpec.from_dict({**spec.model_dump(), "code": {"path": ".", "requirements": "../r.txt"}})
    assert sys.modules.get("myenvs_packed") is None  # a spec is data: loading it imports nothing


# --------------------------------------------------------------------- the digest is part of a run's identity


def _corridor(root: Path, **fields: object) -> ExperimentSpec:
    return ExperimentSpec.from_dict(
        {
            "name": "corridor",
            "environment": {"type": "myenvs_packed:Corridor"},
            "agent": {"type": "ppo", "batch_size": 4},
            "episodes": 2,
            "code": {"path": str(root)},
            **fields,
        }
    )


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_resume_with_other_code_is_refused_naming_both_digests(tmp_path: Path) -> None:
    project = _project(tmp_path / "p", sorted(FILES), mode=0o644, mtime=0)
    results = tmp_path / "results"
    recorded, _archive = pin(_corridor(project))
    create_record(open_store(results / "corridor"), recorded)
    before = _tree(results)
    (project / "myenvs_packed.py").write_bytes(b"class Corridor:\n    width = 7\n")
    changed, _ = pin(_corridor(project))
    assert recorded.code is not None and changed.code is not None
    with pytest.raises(ChangedRunError) as caught:
        Experiment(_corridor(project), results=str(results)).start(validate=False)
    assert [p.field for p in caught.value.problems] == ["code.digest"]
    assert recorded.code.digest in str(caught.value) and changed.code.digest in str(caught.value)
    assert _tree(results) == before  # refused before anything was uploaded or started
    # the same archive from another folder, with other patterns, is the same code
    elsewhere = _project(tmp_path / "copy", sorted(FILES), mode=0o600, mtime=5)
    same, _ = pin(_corridor(elsewhere, code={"path": str(elsewhere), "exclude": ["*.ipynb"]}))
    learning, other = split_changes(diff_specs(recorded, same))
    assert learning == [] and {c.field for c in other} == {"code.path", "code.exclude"}
    assert fingerprint(same) == fingerprint(recorded) != fingerprint(changed)
    assert fingerprint(_corridor(project).model_copy(update={"code": None})) != fingerprint(recorded)


def test_other_code_is_a_recorded_change_where_the_user_accepts_it(tmp_path: Path) -> None:
    project = _project(tmp_path / "p", sorted(FILES), mode=0o644, mtime=0)
    store = open_store(tmp_path / "results" / "corridor")
    recorded, _ = pin(_corridor(project))
    assert start_recorded(store, recorded, lambda: True, where="local")
    (project / "myenvs_packed.py").write_bytes(b"class Corridor:\n    width = 7\n")
    changed, _ = pin(_corridor(project))
    assert recorded.code is not None and changed.code is not None
    with pytest.raises(ChangedRunError, match="--accept-new-code"):  # the refusal says how to accept it
        Experiment(changed, results=str(tmp_path / "results")).start(validate=False)
    spec_before = store.read_bytes("spec.yaml")
    assert start_recorded(store, changed, lambda: True, where="local", accept_new_code=True)
    line = read_history(store)[-1]
    assert line["event"] == "resumed"
    assert {"field": "code.digest", "from": recorded.code.digest, "to": changed.code.digest} in line["changes"]
    assert store.read_bytes("spec.yaml") == spec_before  # the spec of record is never replaced
    # the run's code is now the accepted one: it resumes without the flag, the old code is the change now
    in_force = record_in_force(store)
    assert in_force is not None and in_force["code"]["digest"] == changed.code.digest
    assert check_resume(store, changed) == []
    with pytest.raises(ChangedRunError, match=r"code\.digest"):
        check_resume(store, recorded)
    # adding code to a run without it is accepted the same way
    plain = open_store(tmp_path / "results" / "plain")
    assert start_recorded(plain, recorded.model_copy(update={"code": None}), lambda: True, where="local")
    with pytest.raises(ChangedRunError):
        check_resume(plain, recorded)
    assert start_recorded(plain, recorded, lambda: True, where="local", accept_new_code=True)
    in_force = record_in_force(plain)
    assert in_force is not None and in_force["code"]["digest"] == recorded.code.digest


def test_a_sweeps_trials_all_run_one_digest(tmp_path: Path) -> None:
    project = _project(tmp_path / "p", sorted(FILES), mode=0o644, mtime=0)
    experiment = _corridor(project).model_dump(mode="json")
    sweep = Sweep(
        SweepSpec.from_dict(
            {"name": "sw", "experiment": experiment, "parameters": {"agent.batch_size": [4, 8]}, "seeds": 2}
        ),
        results=str(tmp_path / "results"),
    )
    archive = sweep._pin_code()
    assert archive is not None
    trials = sweep.spec.trials()
    assert len(trials) == 4
    assert {t.spec.code.digest for t in trials if t.spec.code is not None} == {archive.digest}
    # the pods of its one Job fetch that archive from the root's code folder; so do an experiment's roles
    objects = build_sweep_workloads(sweep.spec, namespace="ns", results="gs://bucket/runs")
    job = objects[-1]
    env = {e.name: e.value for e in job.spec.template.spec.containers[0].env}
    assert env["RLCLOUD_CODE_STORE"] == "gs://bucket/runs/_code"
    pinned = sweep.spec.experiment.model_copy(update={"run_mode": "distributed", "num_workers": 2})
    for obj in build_workloads(pinned, namespace="ns", results="gs://bucket/runs"):
        if getattr(obj, "kind", None) == "Job":
            env = {e.name: e.value for e in obj.spec.template.spec.containers[0].env}
            assert env["RLCLOUD_CODE_STORE"] == "gs://bucket/runs/_code", obj.metadata.name
    unpinned = build_workloads(pinned.model_copy(update={"code": None}), namespace="ns", results="gs://b/r")
    assert all(
        "RLCLOUD_CODE_STORE" not in {e.name for e in o.spec.template.spec.containers[0].env}
        for o in unpinned
        if getattr(o, "kind", None) == "Job"
    )
    # a sweep started again with other code is another sweep
    store = open_store(tmp_path / "results" / "sw")
    assert start_sweep_recorded(store, sweep.spec, lambda: True, where="earlier") is True
    (project / "pkg" / "wrappers.py").write_bytes(b"SCALE = 5\n")
    again = Sweep(
        SweepSpec.from_dict(
            {"name": "sw", "experiment": experiment, "parameters": {"agent.batch_size": [4, 8]}, "seeds": 2}
        ),
        results=str(tmp_path / "results"),
    )
    with pytest.raises(ChangedSweepError) as caught:
        again.start(validate=False)
    assert [p.field for p in caught.value.problems] == ["experiment.code.digest"]
    assert not (tmp_path / "results" / "_code").exists()  # nothing uploaded for a refused start


# ---------------------------------------------------------------------------- the corridor example, for real

CORRIDOR = Path(__file__).resolve().parents[1] / "examples" / "corridor"


def test_a_user_class_gets_no_environment_create_arguments() -> None:
    sys.path.insert(0, str(CORRIDOR))
    try:
        env = make_env({"type": "corridor_env:Corridor", "max_episode_timesteps": 50, "width": 3})
        assert env.max_episode_timesteps == 50 and env.env.width == 3  # a limit, and the class's own argument
        env.close()
        env = make_env({"type": "corridor_env:Corridor", "max_episode_timesteps": 50}, max_timesteps_per_episode=20)
        assert env.max_episode_timesteps == 20  # the smaller limit applies
        env.close()
        with pytest.raises(SpecError) as caught:
            make_env({"type": "corridor_env:Corridor", "remote": "multiprocessing", "max_episode_timesteps": 0})
        assert {p.field for p in caught.value.problems} == {
            "environment.remote",
            "environment.max_episode_timesteps",
        }
    finally:
        sys.path.remove(str(CORRIDOR))
    gym = make_env({"type": "gym", "level": "CartPole-v1", "max_episode_timesteps": 30})
    assert gym.max_episode_timesteps == 30  # as for a gym level in Tensorforce
    gym.close()
    longer = make_env({"type": "gym", "level": "CartPole-v1", "max_episode_timesteps": 800})
    assert longer.max_episode_timesteps == 800  # it replaces the level's own 500, as Tensorforce's OpenAIGym
    longer.close()


def test_spec_validate_imports_and_builds_the_environment_from_the_project_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "corridor"
    shutil.copytree(CORRIDOR, project, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(project)
    assert validate_file("corridor.yaml").ok
    # a constructor the runner could not call is named by validate, as the runner would exit 3 with it
    (project / "corridor_env.py").write_text(
        (CORRIDOR / "corridor_env.py").read_text().replace("width: int = 5", "width: int"), encoding="utf-8"
    )
    sys.modules.pop("corridor_env", None)
    try:
        report = validate_file("corridor.yaml")
    finally:
        sys.modules.pop("corridor_env", None)
    assert [p.field for p in report.problems] == ["environment"]
    assert "missing 1 required positional argument: 'width'" in report.problems[0].message


@pytest.mark.training
def test_the_corridor_example_runs_locally_from_its_folder_and_from_its_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "corridor"
    shutil.copytree(CORRIDOR, project, ignore=shutil.ignore_patterns("__pycache__"))
    results = tmp_path / "results"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # without code: the runner imports from the project folder, as spec validate does
    monkeypatch.chdir(project)
    plain = Experiment(project / "corridor.yaml", results=str(results), episodes=3).start()
    assert plain.wait(timeout=600).state == "succeeded", plain.logs()
    assert not (results / "_code").exists()
    # with code: started from elsewhere, the runner can only import the archive, fetched from the store
    monkeypatch.chdir(tmp_path)
    packed = Experiment(project / "corridor.yaml", results=str(results), name="corridor-code", episodes=3, code=".")
    packed.start()
    assert packed.wait(timeout=600).state == "succeeded", packed.logs()
    assert packed.spec.code is not None and packed.spec.code.digest is not None
    stored = open_store(code_location(str(results))).list()
    assert [info.name for info in stored] == [archive_name(packed.spec.code.digest)]
    unpacked = tmp_path / "cache" / "rlcloud" / "code" / packed.spec.code.digest.replace(":", "-")
    assert (unpacked / "corridor_env.py").is_file()
    # the same code again: nothing uploaded (the one object keeps its generation)
    again = Experiment(project / "corridor.yaml", results=str(results), name="corridor-again", episodes=2, code=".")
    again.start()
    assert again.wait(timeout=600).state == "succeeded", again.logs()
    assert open_store(code_location(str(results))).list() == stored


def test_spec_show_code_lists_what_is_packed_and_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "corridor"
    shutil.copytree(CORRIDOR, project, ignore=shutil.ignore_patterns("__pycache__"))
    (project / "sa.json").write_text('{"type": "service_account", "private_key": "x"}')
    monkeypatch.chdir(project)
    assert main(["spec", "show", "--code", "corridor.yaml", "--set", "code=."]) == 0
    out, err = capsys.readouterr()
    archive = pin(ExperimentSpec.from_file("corridor.yaml", code="."))[1]
    assert archive is not None and f"7 files, {len(archive.data)} bytes packed: {archive.digest}" in out
    assert "corridor_env.py" in out and "sa.json" not in out
    assert "left out: sa.json (holds a private key (a service-account key file?))" in err
    assert main(["spec", "show", "--code", "corridor.yaml"]) == 2  # no code: said, exit 2
    assert "has no code" in capsys.readouterr().err


def test_an_archive_travels_through_cloud_storage(
    tmp_path: Path, gcs_bucket: str, fake_gcs: FakeGcsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", fake_gcs.url)  # what a pod's open_store reads
    project = _project(tmp_path / "p", sorted(FILES), mode=0o644, mtime=0)
    pinned, archive = pin(_corridor(project))
    assert archive is not None and pinned.code is not None
    location = code_location(f"gs://{gcs_bucket}/runs")
    with open_store(location) as store:
        assert publish(archive, store) is True
        assert publish(archive, store) is False
        assert [info.name for info in store.list()] == [archive.name]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "pod"))
    folder = code_folder(pinned, RunnerEnv(code_store=location))
    assert folder is not None and (folder / "pkg" / "wrappers.py").read_bytes() == FILES["pkg/wrappers.py"]
    # the spec of record names the archive: a bucket's other objects, or a replaced archive, never act
    fake_gcs.client().bucket(gcs_bucket).blob(f"runs/_code/{archive.name}").upload_from_string(b"planted")
    with pytest.raises(WorkloadError, match="not the spec of record's"):
        fetch(location, archive.digest, cache=tmp_path / "another-pod")


def test_a_sweep_files_code_is_its_experiments(tmp_path: Path) -> None:
    (tmp_path / "exp.yaml").write_text(
        "name: c\nenvironment: {type: 'myenvs_packed:Corridor'}\nagent: {type: ppo}\nepisodes: 1\n"
    )
    (tmp_path / "sweep.yaml").write_text(
        "kind: Sweep\nname: sw\nexperiment: exp.yaml\ncode: {path: ., exclude: [data]}\nseeds: 2\n"
    )
    sweep = SweepSpec.from_file(tmp_path / "sweep.yaml")
    assert sweep.experiment.code == CodeSpec(path=str(tmp_path.resolve()), exclude=["data"])
    assert {t.spec.code.path for t in sweep.trials() if t.spec.code is not None} == {str(tmp_path.resolve())}
    assert SweepSpec.from_yaml_text(sweep.to_yaml()) == sweep  # what a pod reads back


def test_rlcloud_yaml_gives_every_run_its_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project(tmp_path / "p", sorted(FILES), mode=0o644, mtime=0)
    (project / "rlcloud.yaml").write_text("code: {path: ., exclude: [configs]}\n")
    (project / "pkg" / "deep").mkdir()
    monkeypatch.chdir(project / "pkg" / "deep")  # found upwards; the path is rlcloud.yaml's folder
    spec = _corridor(project).model_copy(update={"code": None})
    pinned, archive = pin(spec)
    assert archive is not None and pinned.code is not None
    assert pinned.code.path == str(project.resolve()) and pinned.code.digest == archive.digest
    assert [rel for rel, _ in archive.files] == ["README.txt", "myenvs_packed.py", "pkg/__init__.py", "pkg/wrappers.py",
                                                 "rlcloud.yaml"]  # fmt: skip


def test_spec_validate_packs_the_code_as_a_start_would(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "corridor"
    shutil.copytree(CORRIDOR, project, ignore=shutil.ignore_patterns("__pycache__"))
    spec = project / "corridor.yaml"
    spec.write_text(spec.read_text() + "code: {path: ., requirements: requirements.txt}\n")
    (project / "requirements.txt").unlink()
    monkeypatch.chdir(tmp_path)  # the code folder, not the working directory, is what it imports from
    report = validate_file(spec)
    assert [p.field for p in report.problems] == ["code.requirements"]
    (project / "requirements.txt").write_text("numpy\n")
    assert validate_file(spec).ok


def test_a_local_runs_roles_get_an_absolute_code_store_or_the_project_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    project = _project(tmp_path / "p", sorted(FILES), mode=0o644, mtime=0)
    pinned, _ = pin(_corridor(project))
    assert code_env(pinned, "runs", RunnerEnv()) == {
        "code_store": str(tmp_path / "runs" / "_code"),
        "project_dir": None,
    }
    assert code_env(pinned, "gs://b/runs", RunnerEnv())["code_store"] == "gs://b/runs/_code"
    # a sweep's trial inherits the sweep's root, not its own location
    inherited = RunnerEnv(code_store="gs://b/runs/_code")
    assert code_env(pinned, "gs://b/runs/sweep", inherited)["code_store"] == "gs://b/runs/_code"
    plain = pinned.model_copy(update={"code": None})
    assert code_env(plain, "runs", RunnerEnv()) == {"code_store": None, "project_dir": str(tmp_path)}


@pytest.mark.training
def test_a_local_sweeps_trials_import_the_one_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "corridor"
    shutil.copytree(CORRIDOR, project, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # not the project folder: the trials can only import the archive
    experiment = ExperimentSpec.from_file(project / "corridor.yaml", episodes=2, code=".")
    spec = SweepSpec.from_dict({"name": "corridors", "experiment": experiment.model_dump(mode="json"), "seeds": 2})
    results = tmp_path / "results"
    sweep = Sweep(spec, results=str(results)).start()
    status = sweep.wait(timeout=900)
    assert status.state == "succeeded", status.to_dict()
    digest = sweep.spec.experiment.code.digest if sweep.spec.experiment.code else None
    assert digest is not None
    assert [info.name for info in open_store(code_location(str(results))).list()] == [archive_name(digest)]
    for trial in status.trials:  # each trial's spec of record pins the sweep's digest
        recorded = Experiment.attach(trial.name, results=sweep.location).spec
        assert recorded.code is not None and recorded.code.digest == digest
