"""Run every run mode's pods in a runner image with podman, exactly as rlcloud's Kubernetes builders make them.

Called by ./scripts/check-images once the image is built. For each run mode (single, multi-threaded,
distributed) the example experiment (examples/cartpole_ppo.yaml, summaries on, a few thousand timesteps) goes
through ``build_workloads``; every pod of every Job becomes one ``podman run`` with the pod's argv, environment
(``$(VAR)`` expanded as the kubelet does, the completion index from the downward API), volumes (the ConfigMap
as read-only files, emptyDir as a fresh directory), user/group/fsGroup and container securityContext. Two
additions stand in for what a cluster provides, and nothing else differs:

* ``STORAGE_EMULATOR_HOST``: results go to fake-gcs-server on 127.0.0.1 (on GKE, Workload Identity);
* env-server pods: each gets its own loopback address, as each pod gets its own IP on a cluster: the Service's
  DNS names resolve to it in the learner (``--add-host``) and the env server binds it (``RLCLOUD_BIND_HOST``),
  since every container here shares the host's network (two servers could not both bind 0.0.0.0:5000).

Then the corridor example (examples/corridor/shaped.yaml: a user's own gymnasium.Env, which the image does not
hold, and a package of the project's own in its requirements.txt) runs in every run mode from its code archive
(``code: {path: ., requirements: requirements.txt}``, packed and stored in fake-gcs-server as ``Experiment.start``
does): each pod fetches the archive its spec names, checks its digest, installs the requirements with the
image's uv into an overlay (offline: the package is in the archive) and imports the environment from it.

It prints, per run mode, the time from container start to the first episode (the learner's metrics.jsonl
gets its first line) and to exit, and the objects written to the store; then checks that ``podman kube
play`` accepts the learner Job's pod template unchanged and runs it to completion as UID 10001. Every
container and pod started is appended to ``--ids`` (``container ID`` / ``pod ID``) before anything waits on
it, so that check-images removes it by id whatever happens; fake-gcs-server's pid goes to ``--pids``.
Exit 1 with one line naming what failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.fakes.gcs: the fake-gcs-server the tests use

from kubernetes import client as k8s  # noqa: E402
from tests.fakes.gcs import FakeGcsServer  # noqa: E402

from rlcloud.k8s.builders import JOB_COMPLETION_INDEX_ANNOTATION, build_workloads, to_dict  # noqa: E402
from rlcloud.runenv import RunnerEnv  # noqa: E402
from rlcloud.specs import ExperimentSpec  # noqa: E402

EXAMPLE = ROOT / "examples" / "cartpole_ppo.yaml"
#: a user's own environment, beside its spec, shaped by a package of the project's own named in its requirements:
#: what a pod can only import from the run's code archive and the overlay its requirements install into
CORRIDOR = ROOT / "examples" / "corridor" / "shaped.yaml"
CODE_EPISODES = 6
BUCKET = "check-images"
NAMESPACE = "rlcloud"
#: (run mode, workers): the example is multi-threaded with 32 environments; a few thousand timesteps each
MODES = (("single", 1), ("multi-threaded", 32), ("distributed", 2))
TIMESTEPS = 3000
#: the corridor from its code archive, in every run mode (its environment is cheap: a few workers do)
CODE_MODES = (("single", 1), ("multi-threaded", 4), ("distributed", 2))
MODE_TIMEOUT_S = 900
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


class CheckError(Exception):
    """What failed, in one line."""


def expand(value: str, env: dict[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion: a defined variable is replaced, ``$$`` is a literal ``$``,
    an undefined reference is left as written (Kubernetes' ``dependent environment variables``)."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _VAR_REF.sub(one, value)


class Engine:
    """podman, with every container/pod it starts recorded in the ids file first."""

    def __init__(self, ids: Path) -> None:
        self.ids = ids

    def record(self, kind: str, ident: str) -> None:
        """Append ``kind ident`` to the ids file (check-images removes it by id on exit)."""
        with self.ids.open("a") as f:
            f.write(f"{kind} {ident}\n")

    def run(self, *args: str, check: bool = True) -> str:
        """``podman ARGS``' stdout; CheckError with podman's last line when it fails and ``check``."""
        done = subprocess.run(["podman", *args], capture_output=True, text=True)
        if check and done.returncode != 0:
            raise CheckError(f"podman {args[0]} failed: {done.stderr.strip().splitlines()[-1:]}")
        return done.stdout.strip()

    def inspect(self, ident: str, template: str) -> str:
        """One field of a container, through a Go template."""
        return self.run("inspect", "--format", template, ident)

    def logs(self, ident: str, lines: int = 40) -> str:
        """A container's last log lines (to show why it failed)."""
        done = subprocess.run(["podman", "logs", "--tail", str(lines), ident], capture_output=True, text=True)
        return done.stdout + done.stderr


def _container_options(container: k8s.V1Container) -> list[str]:
    """``podman run`` options of the container's securityContext and resource limits (CheckError: unknown)."""
    options: list[str] = []
    sc = container.security_context
    if sc is not None:
        if sc.allow_privilege_escalation is False:
            options += ["--security-opt", "no-new-privileges"]
        for cap in (sc.capabilities.drop or []) if sc.capabilities else []:
            options += ["--cap-drop", cap]
        for cap in (sc.capabilities.add or []) if sc.capabilities else []:
            options += ["--cap-add", cap]
        if sc.privileged or sc.read_only_root_filesystem:
            raise CheckError("privileged / readOnlyRootFilesystem are not translated here")
    if container.resources is not None and (container.resources.limits or {}):
        limits = container.resources.limits
        if "cpu" in limits:
            cpu = str(limits["cpu"])
            options += ["--cpus", str(int(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu))]
        if "memory" in limits:
            options += ["--memory", str(limits["memory"]).replace("Gi", "g").replace("Mi", "m")]
        if set(limits) - {"cpu", "memory"}:
            raise CheckError(f"resources {sorted(limits)}: only cpu and memory can be given to podman here")
    return options


def pod_run_args(
    pod: k8s.V1PodSpec, *, index: int, volumes_dir: Path, config_maps: dict[str, dict[str, str]]
) -> tuple[list[str], str, dict[str, str]]:
    """``podman run`` options, image and environment of ``pod``'s single container, as the kubelet would run it.

    Volumes are made under ``volumes_dir``. Anything in the pod this translation does not know is refused
    (CheckError), so a builder change cannot slip past the check unnoticed.
    """
    (container,) = pod.containers
    options: list[str] = ["--pull=never", "--init=false"]
    # pod securityContext: runAsNonRoot/runAsUser/runAsGroup/fsGroup
    context = pod.security_context
    if context is None or not context.run_as_user:
        raise CheckError("the pod has no runAsUser: it would run as the image's user")
    if context.run_as_non_root and int(context.run_as_user) == 0:
        raise CheckError("runAsNonRoot with runAsUser 0: the kubelet refuses to start such a pod")
    options += ["--user", f"{context.run_as_user}:{context.run_as_group or context.run_as_user}"]
    if context.fs_group is not None:
        options += ["--group-add", str(context.fs_group)]
    options += _container_options(container)
    # environment, in order: $(VAR) refers to variables defined before it
    env: dict[str, str] = {}
    for var in container.env or []:
        if var.value_from is not None:
            field = var.value_from.field_ref.field_path if var.value_from.field_ref else None
            if field != f"metadata.annotations['{JOB_COMPLETION_INDEX_ANNOTATION}']":
                raise CheckError(f"env {var.name}: only the completion index comes from the downward API here")
            env[var.name] = str(index)
        else:
            env[var.name] = expand(var.value or "", env)
    # volumes
    by_name = {v.name: v for v in pod.volumes or []}
    for mount in container.volume_mounts or []:
        volume = by_name[mount.name]
        host = volumes_dir / mount.name
        if volume.config_map is not None:
            data = config_maps[volume.config_map.name]
            host.mkdir(parents=True)
            items = volume.config_map.items or [k8s.V1KeyToPath(key=k, path=k) for k in data]
            for item in items:
                (host / item.path).write_text(data[item.key])
                (host / item.path).chmod(0o644)  # the kubelet's defaultMode
            host.chmod(0o755)
        elif volume.empty_dir is not None:
            # the kubelet's emptyDir: 0777, and with fsGroup group-owned by it with the setgid bit
            host.mkdir(parents=True)
            if context.fs_group is not None:
                os.chown(host, 0, int(context.fs_group))
            host.chmod(0o2777 if context.fs_group is not None else 0o777)
        else:
            raise CheckError(f"volume {mount.name}: only configMap and emptyDir volumes are translated here")
        options += ["--volume", f"{host}:{mount.mount_path}{':ro' if mount.read_only else ''}"]
    if container.command:
        options += ["--entrypoint", json.dumps(container.command)]
    return options, container.image, env


def _args(container: k8s.V1Container, env: dict[str, str]) -> list[str]:
    return [expand(a, env) for a in container.args or []]


def _objects(store: Any, prefix: str) -> list[tuple[str, int]]:
    return [(b.name[len(prefix) :], int(b.size or 0)) for b in store.list_blobs(BUCKET, prefix=prefix)]


def _kinds(names: list[tuple[str, int]]) -> str:
    """Objects grouped by their top-level folder (or name): 'metrics.jsonl, checkpoints/ (3), ...'."""
    counts = Counter(name.split("/", 1)[0] + ("/" if "/" in name else "") for name, _ in names)
    return ", ".join(f"{k} ({n})" if n > 1 else k for k, n in sorted(counts.items()))


def _service_addresses(services: list[k8s.V1Service], jobs: list[k8s.V1Job]) -> dict[str, str]:
    """The headless Service's names, ``<job>-<index>.<service>``: one loopback address per env-server pod."""
    addresses: dict[str, str] = {}
    for service in services:
        env_job = next(j for j in jobs if j.metadata.name == service.metadata.name)
        for i in range(env_job.spec.completions):
            addresses[f"{env_job.metadata.name}-{i}.{service.metadata.name}"] = f"127.0.0.{2 + i}"
    return addresses


def _wait_for_learner(engine: Engine, learner: str, learner_dir: Path, mode: str) -> float | None:
    """Wait until the learner's container exits; when its first episode was written (None: never).

    ``learner_dir``: the pod's work emptyDir; the runner's work directory is its ``work/`` (the rest of the
    volume is the cache, where uv's temporary folders come and go while requirements install)."""
    first_episode: float | None = None
    deadline = time.monotonic() + MODE_TIMEOUT_S
    while True:
        if first_episode is None:
            with contextlib.suppress(FileNotFoundError):  # a folder the runner replaced as it was listed
                for metrics in (learner_dir / "work").rglob("metrics.jsonl"):
                    if metrics.stat().st_size > 0:
                        first_episode = time.time()
        if engine.inspect(learner, "{{.State.Running}}") != "true":
            return first_episode
        if time.monotonic() > deadline:
            raise CheckError(f"{mode}: the learner still runs after {MODE_TIMEOUT_S} s\n{engine.logs(learner)}")
        time.sleep(0.2)


def run_mode(
    engine: Engine,
    image: str,
    work: Path,
    gcs: FakeGcsServer,
    mode: str,
    workers: int,
    spec: ExperimentSpec | None = None,
) -> list[str]:
    """Run one mode's pods to completion; return its figure lines. CheckError names what went wrong.

    ``spec``: another experiment than the example (its name, mode and workers set already)."""
    if spec is None:
        spec = ExperimentSpec.from_file(
            EXAMPLE, name=f"check-{mode}", run_mode=mode, num_workers=workers, total_timesteps=TIMESTEPS
        )
    name = spec.name
    objects = build_workloads(spec, image=image, namespace=NAMESPACE, results=f"gs://{BUCKET}/runs")
    config_maps = {o.metadata.name: o.data for o in objects if isinstance(o, k8s.V1ConfigMap)}
    services = [o for o in objects if isinstance(o, k8s.V1Service)]
    jobs = [o for o in objects if isinstance(o, k8s.V1Job)]
    addresses = _service_addresses(services, jobs)
    started: list[tuple[str, str, str]] = []  # (job, container id, role)
    learner_dir: Path | None = None
    for job in jobs:  # in creation order: env servers first, as on a cluster
        pod = job.spec.template.spec
        indexed = job.spec.completion_mode == "Indexed"
        for index in range(job.spec.completions if indexed else 1):
            pod_name = f"{job.metadata.name}-{index}"
            volumes = work / "volumes" / pod_name
            options, pod_image, env = pod_run_args(pod, index=index, volumes_dir=volumes, config_maps=config_maps)
            extra = {"STORAGE_EMULATOR_HOST": gcs.url}
            address = addresses.get(f"{pod_name}.{pod.subdomain}") if pod.subdomain else None
            if address:
                extra.update(RunnerEnv(bind_host=address).to_env())
            hosts = [f"--add-host={host}:{ip}" for host, ip in addresses.items()] if not address else []
            envs = [f"--env={k}={v}" for k, v in {**env, **extra}.items()]
            argv = ["run", "--detach", *options, *envs, *hosts, pod_image, *_args(pod.containers[0], env)]
            ident = engine.run(*argv)
            engine.record("container", ident)
            started.append((job.metadata.name, ident, job.metadata.labels["rlcloud.io/role"]))
            if not indexed:
                learner_dir = volumes / "work"
    assert learner_dir is not None
    learner = next(ident for _, ident, role in started if role != "env-server")
    t_start = int(engine.inspect(learner, "{{.State.StartedAt.UnixNano}}")) / 1e9
    first_episode = _wait_for_learner(engine, learner, learner_dir, mode)
    code = int(engine.inspect(learner, "{{.State.ExitCode}}"))
    t_exit = int(engine.inspect(learner, "{{.State.FinishedAt.UnixNano}}")) / 1e9
    if code != 0:
        raise CheckError(f"{mode}: the learner exited {code}:\n{engine.logs(learner)}")
    # env servers exit 0 once the agent says the run is over
    for _, ident, role in started:
        if role == "env-server":
            done = subprocess.run(["podman", "wait", ident], capture_output=True, text=True, timeout=120)
            if done.stdout.strip() != "0":
                raise CheckError(f"{mode}: env server exited {done.stdout.strip()}:\n{engine.logs(ident)}")
    written = _objects(gcs.client(), f"runs/{name}/")
    names = [n for n, _ in written]
    if "metrics.jsonl" not in names:
        raise CheckError(f"{mode}: no metrics.jsonl in gs://{BUCKET}/runs/{name}/ (objects: {names})")
    if spec.summary_frequency is not None and not any("tfevents" in n for n in names):
        raise CheckError(f"{mode}: no TensorBoard events in gs://{BUCKET}/runs/{name}/ (objects: {names})")
    episodes = len(gcs.client().bucket(BUCKET).blob(f"runs/{name}/metrics.jsonl").download_as_text().splitlines())
    to_first = "never" if first_episode is None else f"{first_episode - t_start:.1f} s"
    pods = len(started)
    for _, ident, _ in started:
        engine.run("rm", "--force", ident, check=False)
    length = f"{spec.total_timesteps} timesteps" if spec.total_timesteps else f"{spec.episodes} episodes"
    what = f"{mode}, code {spec.code.digest[:19]}" if spec.code is not None and spec.code.digest else mode
    return [
        f"{what} ({pods} container{'s' if pods > 1 else ''}, {workers} environment{'s' if workers > 1 else ''}, "
        f"{length}): first episode {to_first} after start, exit 0 after {t_exit - t_start:.1f} s, "
        f"{episodes} episodes; {len(written)} objects ({sum(s for _, s in written) / 1e6:.1f} MB) in "
        f"gs://{BUCKET}/runs/{name}/: {_kinds(written)}"
    ]


def code_mode(engine: Engine, image: str, work: Path, gcs: FakeGcsServer, mode: str, workers: int) -> list[str]:
    """The corridor example (examples/corridor/shaped.yaml: a gymnasium.Env of the user's, not in the image,
    shaped by pkgs/corridor_rewards, named in its requirements.txt) in ``mode``, its folder packed and stored as
    ``Experiment.start`` does (rlcloud.codepack): every pod fetches the archive its spec names, checks the
    digest, unpacks it, installs the requirements into an overlay and imports the environment; the image is
    unchanged.
    """
    from rlcloud.codepack import code_location, pin, publish
    from rlcloud.storage import open_store

    spec = ExperimentSpec.from_file(
        CORRIDOR, name=f"check-code-{mode}", run_mode=mode, num_workers=workers, episodes=CODE_EPISODES
    )
    assert spec.code is not None and spec.code.requirements is not None
    spec, archive = pin(spec)
    assert archive is not None
    os.environ["STORAGE_EMULATOR_HOST"] = gcs.url  # this process uploads as the client would
    with open_store(code_location(f"gs://{BUCKET}/runs")) as store:
        publish(archive, store)
    return run_mode(engine, image, work, gcs, mode, workers, spec=spec)


def kube_play(engine: Engine, image: str, work: Path) -> str:
    """``podman kube play`` of the single-mode learner Job's pod template, unchanged, with its ConfigMap."""
    spec = ExperimentSpec.from_file(
        EXAMPLE, name="check-kube-play", run_mode="single", num_workers=1, total_timesteps=500
    )
    objects = build_workloads(spec, image=image, namespace=NAMESPACE)  # no results: the pod keeps them
    (config_map,) = [o for o in objects if isinstance(o, k8s.V1ConfigMap)]
    (job,) = [o for o in objects if isinstance(o, k8s.V1Job)]
    template = to_dict(job.spec.template)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": job.metadata.name, **template["metadata"]}}
    pod["spec"] = template["spec"]
    files = work / "kube"
    files.mkdir()
    (files / "pod.json").write_text(json.dumps(pod))
    (files / "configmap.json").write_text(json.dumps(to_dict(config_map)))
    done = subprocess.run(
        ["podman", "kube", "play", "--configmap", str(files / "configmap.json"), str(files / "pod.json")],
        capture_output=True,
        text=True,
    )
    # the pod's id is recorded even when play fails half-way
    pod_id = subprocess.run(
        ["podman", "pod", "inspect", "--format", "{{.ID}}", job.metadata.name], capture_output=True, text=True
    ).stdout.strip()
    if pod_id:
        engine.record("pod", pod_id)
    if done.returncode != 0:
        raise CheckError(f"podman kube play refused the pod template: {done.stderr.strip()[-400:]}")
    container = f"{job.metadata.name}-runner"
    code = subprocess.run(["podman", "wait", container], capture_output=True, text=True, timeout=600).stdout.strip()
    user = engine.inspect(container, "{{.Config.User}}")
    if code != "0":
        raise CheckError(f"kube play: the runner exited {code}:\n{engine.logs(container)}")
    if not user.startswith("10001"):
        raise CheckError(f"kube play: the runner ran as {user!r}, not UID 10001")
    engine.run("pod", "rm", "--force", pod_id, check=False)
    return f"podman kube play: the learner Job's pod template accepted unchanged, ran as {user}, exit 0"


def docs_commands(engine: Engine, image: str, work: Path) -> list[str]:
    """Run docs/images.md's check commands as written (``docker`` is podman here) against ``image``."""
    text = (ROOT / "docs" / "images.md").read_text()
    section = text[text.index("Check an image before you push it") :]
    section = section[: section.index("\n## ")]
    commands = [re.search(r"`(docker run --rm \$IMAGE --help)`", section).group(1)]  # type: ignore[union-attr]
    block = re.search(r"```bash\n(.+?)```", section, re.S).group(1)  # type: ignore[union-attr]
    commands.append(block.replace("\\\n", " "))
    lines = []
    for n, command in enumerate(commands):
        words = shlex.split(command.replace("$IMAGE", image).replace("$PWD", str(ROOT)))
        assert words[:3] == ["docker", "run", "--rm"], words
        cidfile = work / f"docs-{n}.cid"
        started = time.monotonic()
        # the container's id is recorded as soon as podman has created it (check-images removes it by id)
        proc = subprocess.Popen(
            ["podman", "run", "--cidfile", str(cidfile), *words[2:]],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        while proc.poll() is None and not cidfile.exists():
            time.sleep(0.1)
        if cidfile.exists():
            engine.record("container", cidfile.read_text().strip())
        out, _ = proc.communicate(timeout=MODE_TIMEOUT_S)
        if proc.returncode != 0:
            raise CheckError(f"docs/images.md's check command failed ({proc.returncode}): {command}\n{out[-3000:]}")
        lines.append(
            f"docs/images.md: `{command.split(' $IMAGE ')[1][:40]}...` exit 0 in {time.monotonic() - started:.0f} s"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the checks; print the figures; 0 when every mode trained, 1 with one line otherwise."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", required=True)
    parser.add_argument("--work", type=Path, required=True, help="a scratch directory (check-images removes it)")
    parser.add_argument("--ids", type=Path, required=True, help="file: started containers/pods, one per line")
    parser.add_argument("--pids", type=Path, required=True, help="file: pids of servers started here")
    parser.add_argument("--figure", action="append", default=[], help="a line to print with the figures")
    parser.add_argument("--mode", action="append", choices=[m for m, _ in MODES], help="only these run modes")
    args = parser.parse_args(argv)
    engine = Engine(args.ids)
    lines = list(args.figure)
    gcs = FakeGcsServer()
    try:
        gcs.start()
        with args.pids.open("a") as f:
            f.write(f"{gcs.pid}\n")
        gcs.create_bucket(BUCKET)
        for mode, workers in MODES:
            if args.mode and mode not in args.mode:
                continue
            print(f"{time.strftime('%H:%M:%S')} {mode}: starting its pods", flush=True)
            lines += run_mode(engine, args.image, args.work, gcs, mode, workers)
            print(f"{time.strftime('%H:%M:%S')} {lines[-1]}", flush=True)
        for mode, workers in CODE_MODES:
            if args.mode and mode not in args.mode:
                continue
            print(f"{time.strftime('%H:%M:%S')} {mode}, the corridor from its code archive: starting", flush=True)
            lines += code_mode(engine, args.image, args.work, gcs, mode, workers)
            print(f"{time.strftime('%H:%M:%S')} {lines[-1]}", flush=True)
        lines.append(kube_play(engine, args.image, args.work))
        lines += docs_commands(engine, args.image, args.work)
    except (CheckError, subprocess.TimeoutExpired) as exc:
        print(f"check-images: {exc}", file=sys.stderr)
        return 1
    finally:
        gcs.stop()
    print(
        "\ncheck-images: the runner image trains the example, and a custom environment from its code archive, "
        "in every run mode"
    )
    for line in lines:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
