"""``rlcloud init`` and ``rlcloud experiment new``: project set-up from the bundled default specs."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import yaml

from rlcloud.config import CONFIG_FILE, check_credentials_file
from rlcloud.errors import SpecError, SpecProblem

CONFIG_KINDS = ("clusters", "experiments", "agents", "networks", "environments")


def bundled_configs() -> Path:
    """The directory of default specs shipped inside the package."""
    return Path(str(resources.files("rlcloud") / "configs"))


def init_project(
    directory: Path,
    *,
    project: str | None = None,
    credentials: str | None = None,
    results: str | None = None,
    force: bool = False,
) -> list[str]:
    """Write rlcloud.yaml and copy the default specs into ``directory``/configs/<kind>/.

    Existing files are kept unless ``force``. The credentials file is checked and its *path* stored; it is
    never copied into the project nor printed. Returns a human report, one line per action.
    """
    from rlcloud.specs.cluster import PROJECT_RE

    if project is not None and not PROJECT_RE.match(project):
        raise SpecError(
            [SpecProblem("--project", "a Google Cloud project id is 6-30 lowercase letters, digits or '-'", project)]
        )
    if results is not None:
        from rlcloud.results import check_results_root

        results = check_results_root(results)  # `--results ''` is an error, not the default
    if credentials is not None:
        check_credentials_file(credentials)
        credentials = str(Path(credentials).expanduser().resolve())
    try:
        return _write_project(directory, project, credentials, results, force)
    except OSError as exc:  # /proc/x, a read-only or full disk, a file where the directory should be
        where = exc.filename or directory
        raise SpecError(
            [SpecProblem("--dir", f"cannot write the project into {directory} ({where}: {exc.strerror or exc})")]
        ) from None


def _write_project(
    directory: Path, project: str | None, credentials: str | None, results: str | None, force: bool
) -> list[str]:
    from rlcloud.results import DEFAULT_RESULTS

    directory.mkdir(parents=True, exist_ok=True)
    report: list[str] = []
    config_path = directory / CONFIG_FILE
    if config_path.exists() and not force:
        report.append(f"kept {config_path} (exists; --force overwrites)")
    else:
        data = {"project": project, "results": results or DEFAULT_RESULTS, "credentials": credentials}
        text = "# rlcloud project settings: defaults for every rlcloud command run in this directory.\n"
        text += yaml.safe_dump({k: v for k, v in data.items() if v is not None}, sort_keys=False)
        text += placeholders(project)
        config_path.write_text(text, encoding="utf-8")
        report.append(f"wrote {config_path}")
    copied = kept = 0
    for kind in CONFIG_KINDS:
        target_dir = directory / "configs" / kind
        target_dir.mkdir(parents=True, exist_ok=True)
        for source in sorted((bundled_configs() / kind).glob("*.yaml")):
            target = target_dir / source.name
            if target.exists() and not force:
                kept += 1
                continue
            shutil.copyfile(source, target)
            copied += 1
    report.append(f"copied {copied} default specs into {directory / 'configs'}/" + (f" (kept {kept})" if kept else ""))
    if credentials:
        report.append("credentials: checked; rlcloud.yaml stores the key file's path only")
    elif project:
        report.append("credentials: Application Default Credentials (gcloud auth application-default login)")
    report.append(f"next: rlcloud experiment run {directory / 'configs/experiments/cartpole-ppo.yaml'}")
    report.append(f"before a cluster run: fill in image (and gpu_image) in {config_path} (docs/images.md)")
    return report


def placeholders(project: str | None = None) -> str:
    """The commented settings ``rlcloud init`` writes for the user to fill in, one line each on what goes
    there (a cluster run needs an image: rlcloud has none that every project can pull)."""
    p = project or "my-project"
    lines = [
        "",
        "# Needed on a cluster (GKE or Kubernetes): uncomment and fill in.",
        "# Zone or region new clusters go to, e.g. us-central1-a (GPU types differ by zone):",
        "# location: us-central1-a",
        "# Runner image for CPU pods, built from images/cpu and pushed where your nodes can pull (docs/images.md):",
        f"# image: us-central1-docker.pkg.dev/{p}/rlcloud/runner-cpu:0.1.0",
        "# Runner image for GPU pods, built from images/gpu (docs/images.md):",
        f"# gpu_image: us-central1-docker.pkg.dev/{p}/rlcloud/runner-gpu:0.1.0",
        "# Google service account the pods write results as, through Workload Identity (docs/gke-setup.md#5):",
        f"# gcp_service_account: rlcloud-runner@{p}.iam.gserviceaccount.com",
        "# Google service account of the in-cluster reaper (ttl/autodown; docs/gke-setup.md#7):",
        f"# reaper_service_account: rlcloud-reaper@{p}.iam.gserviceaccount.com",
    ]
    return "\n".join(lines) + "\n"


def new_experiment_file(
    name: str, *, template: str = "cartpole-ppo", dest: str | Path = ".", force: bool = False
) -> Path:
    """Write ``<dest>/<name>.yaml``: a copy of a bundled experiment with its name set (tensorforce-client's
    ``experiment new``)."""
    from rlcloud.specs._base import check_dns_label

    try:
        check_dns_label(name, what="experiment name")
    except Exception as exc:
        raise SpecError([SpecProblem("name", str(exc), name)]) from None
    templates = {p.stem: p for p in (bundled_configs() / "experiments").glob("*.yaml")}
    source = templates.get(template)  # looked up by name, never as a path (a 300-character name: ENAMETOOLONG)
    if source is None:
        valid = ", ".join(sorted(templates))
        raise SpecError([SpecProblem("--template", f"unknown template; valid: {valid}", template)])
    target = Path(dest) / f"{name}.yaml"
    if target.exists() and not force:
        raise SpecError([SpecProblem("name", f"{target} exists already (--force overwrites)", name)])
    target.parent.mkdir(parents=True, exist_ok=True)
    lines = source.read_text(encoding="utf-8").splitlines()
    out = [f"name: {name}" if line.startswith("name:") else line for line in lines]
    target.write_text("\n".join(out) + "\n", encoding="utf-8")
    return target
