"""A role's start-up with a code archive (issue 40): none, code without requirements, one local requirement.

What a pod adds before it imports its environment, each case in a fresh Python process as a pod starts one
(``python -c``: rlcloud's runner code, then the spec's environment module), timed from the parent, the
archive in fake-gcs-server behind a proxy that holds each request ``--latency-ms`` (default 20: a pod's round
trip to Cloud Storage in its region):

- none:            no ``code:``: the project folder on ``sys.path`` (a local run's way), ``import corridor_env``;
- code:            examples/corridor as ``code: .``: fetch, digest check, read-only unpack into an empty cache,
                   ``import corridor_env`` (goal: <= 5 s over none);
- code, cached:    the same with the archive unpacked already (a warm worker's next trial, a laptop);
- requirement, first install: examples/corridor/shaped.yaml (``requirements.txt`` names
                   ``./pkgs/corridor_rewards``) in a pod of its own: fetch + unpack, uv installs the package
                   offline into an overlay (a setuptools build), ``import shaped_env``; empty caches, uv's too;
- requirement, cached: the same with the overlay there (the same requirements over the same image).

Run with ``uv run --frozen python benchmarks/code_startup.py`` (uv on PATH).

Measured 2026-11-28 on the 2-core development VM (shared with seven other jobs, load ~3), 20 ms, median of 7:
none 0.43 s; code 0.84 s (+0.41 s: fetch, check, unpack); code, cached 0.52 s (+0.09 s); one local
requirement, first install 1.05 s (+0.62 s: fetch, unpack, uv's offline setuptools build and install);
requirement, cached 0.48 s (+0.04 s). At load ~10 the same first install took 1.7-2.7 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fakes

from tests.fakes.faulty_proxy import FaultyProxy
from tests.fakes.gcs import FakeGcsServer

from rlcloud.codepack import code_location, pin, publish
from rlcloud.specs import ExperimentSpec
from rlcloud.storage.gcs import GcsStore

CORRIDOR = Path(__file__).resolve().parents[1] / "examples" / "corridor"

#: A role's first steps: the runner's code installed as install_code does, then the environment's module.
PROBE = """
import sys
from rlcloud.runner.code import install_code
from rlcloud.specs import ExperimentSpec
spec = ExperimentSpec.from_file(sys.argv[1])
install_code(spec)
__import__(sys.argv[2])
"""


def role(spec_file: Path, module: str, env: dict[str, str]) -> float:
    """Seconds a fresh process takes to install the spec's code and import ``module``."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, str(spec_file), module], env=env, capture_output=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{spec_file.name}: exit {done.returncode}\n{done.stderr.decode()[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeGcsServer() as server:
        work = Path(tmp)
        project = work / "corridor"
        shutil.copytree(CORRIDOR, project, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
        with FaultyProxy(server.url, latency_s=args.latency_ms / 1000) as proxy:
            client = server.client_for(proxy.url)
            bucket = server.create_bucket()
            specs = {}
            for name, spec in (
                ("code", ExperimentSpec.from_file(project / "corridor.yaml", code=".")),
                ("requirement", ExperimentSpec.from_file(project / "shaped.yaml")),
            ):
                pinned, archive = pin(spec)
                assert archive is not None
                publish(archive, GcsStore(bucket, "runs/_code", client=client))
                specs[name] = work / f"{name}.yaml"
                specs[name].write_text(pinned.to_yaml())
            plain = work / "plain.yaml"
            plain.write_text(ExperimentSpec.from_file(project / "corridor.yaml").to_yaml())
            base = dict(os.environ, STORAGE_EMULATOR_HOST=proxy.url)
            base["RLCLOUD_CODE_STORE"] = code_location(f"gs://{bucket}/runs")
            times: dict[str, list[float]] = {}
            for i in range(args.repeats):
                # every repeat new pods: empty caches (uv's included); the two archives are one (the same
                # files), so each kind of pod has a cache of its own and fetches it
                env = dict(base, XDG_CACHE_HOME=str(work / f"pod-{i}"))
                with_requirement = dict(base, XDG_CACHE_HOME=str(work / f"pod-{i}-requirement"))
                none_env = dict(env, RLCLOUD_PROJECT_DIR=str(project))
                for case, spec_file, module, case_env in (
                    ("none", plain, "corridor_env", none_env),
                    ("code", specs["code"], "corridor_env", env),
                    ("code, cached", specs["code"], "corridor_env", env),
                    ("requirement, first install", specs["requirement"], "shaped_env", with_requirement),
                    ("requirement, cached", specs["requirement"], "shaped_env", with_requirement),
                ):
                    times.setdefault(case, []).append(role(spec_file, module, case_env))
            client.close()
    none = statistics.median(times["none"])
    print(f"a role's start to its environment module imported, median of {args.repeats}, {args.latency_ms:g} ms")
    for case, values in times.items():
        median = statistics.median(values)
        extra = "" if case == "none" else f"  (+{median - none:.2f} s over none)"
        print(f"  {case:28s} {median:6.2f} s{extra}")
    print("goal: code without requirements <= 5 s over none")


if __name__ == "__main__":
    main()
