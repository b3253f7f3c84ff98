"""The trained policy of a run, wherever its results are: restored (``Experiment.agent``), exported as a
SavedModel (``Experiment.export``), watched as a GIF or MP4 (``Experiment.video``).

A local run's checkpoint is read where it is; a ``gs://`` run's one checkpoint (the latest, or the one named)
is downloaded into a temporary directory, restored and the directory removed: the agent then holds its
variables in memory. A run with ``code:`` gets its code archive (the spec of record's digest) fetched from
the store, checked and put on ``sys.path`` first, its requirements installed, as in its pods: a laptop
without the project folder restores it all the same. The heavy work (TensorFlow, Tensorforce, the
environment) is runner/policy.py's.

Video: GIF through Pillow (matplotlib's dependency, in the analysis extra), MP4 through imageio with its
ffmpeg plugin (the ``video`` extra). Frames are bounded (runner/policy.py: ``MAX_FRAMES`` frames of at
most ``MAX_FRAME_PIXELS`` pixels).
"""

from __future__ import annotations

import base64
import contextlib
import html
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlcloud.errors import SpecError, SpecProblem
from rlcloud.layout import CHECKPOINTS, LATEST, checkpoint_path
from rlcloud.results import is_gcs

if TYPE_CHECKING:
    from rlcloud.runner.policy import Policy
    from rlcloud.specs import ExperimentSpec
    from rlcloud.storage.base import Store

__all__ = ["VIDEO_FORMATS", "Video", "install_run_code", "load", "render"]

#: File suffixes :func:`render` writes, and what writes them.
VIDEO_FORMATS = {".gif": "Pillow (the analysis extra)", ".mp4": "imageio with imageio-ffmpeg (the video extra)"}
#: Frames per second of a video: gymnasium's CartPole renders at 50 (its metadata's render_fps); a GIF
#: keeps delays in hundredths of a second, so 50 (20 ms) is exact where 30 would be 30 ms, not 33.3.
DEFAULT_FPS = 50
#: The largest video shown inline in a notebook (base64 in the page): bigger ones are linked instead.
INLINE_BYTES = 8 * 1024 * 1024


@dataclass
class Video:
    """A rendered video of a trained policy: where it was written, each episode's return and length.

    In a notebook it shows inline (a GIF as an image, an MP4 as a video element).
    """

    path: Path
    returns: list[float]
    lengths: list[int]
    checkpoint: str
    frames: int = 0

    def _repr_html_(self) -> str:
        caption = html.escape(
            f"{self.path.name}: {len(self.returns)} episode(s), returns "
            + ", ".join(f"{r:g}" for r in self.returns)
            + f" (checkpoint {self.checkpoint})"
        )
        size = self.path.stat().st_size if self.path.exists() else 0
        if not size or size > INLINE_BYTES:
            return f"<p>{caption}: {html.escape(str(self.path))}</p>"
        data = base64.b64encode(self.path.read_bytes()).decode("ascii")
        if self.path.suffix.lower() == ".gif":
            media = f'<img src="data:image/gif;base64,{data}"/>'
        else:
            media = f'<video controls src="data:video/mp4;base64,{data}"></video>'
        return f"<figure>{media}<figcaption>{caption}</figcaption></figure>"


@contextlib.contextmanager
def _checkpoint_dir(store: Store, location: str, checkpoint: str | None) -> Iterator[Path]:
    """A directory holding the run's checkpoints as the runner wrote them: the run's own directory when it is
    local, else a temporary one with the named (or latest) checkpoint downloaded into it."""
    if not is_gcs(location):
        yield Path(location)
        return
    from rlcloud.storage.base import local_targets
    from rlcloud.storage.client import destinations
    from rlcloud.storage.sync import read_latest

    with tempfile.TemporaryDirectory(prefix="rlcloud-policy-") as tmp:
        local = Path(tmp)
        name = checkpoint
        if name is None:
            latest = read_latest(store)
            name = latest[0] if latest else None
        if name is not None:
            items = [i for i in store.list(checkpoint_path(name)) if i.name.startswith(checkpoint_path(name) + "/")]
            targets, _skipped = local_targets(items, local)
            store.download_files(destinations(local, targets))
            if checkpoint is None and items:
                (local / LATEST).write_text(name + "\n", encoding="utf-8")
        else:
            (local / CHECKPOINTS).mkdir()
        yield local


def _code_store(location: str, digest: str) -> str:
    """The code folder holding the archive ``digest`` names: the run's results root's (``<root>/<run>``), or
    for a sweep's trial (``<root>/<sweep>/<trial>``) the sweep's results root's. One stat per place."""
    from rlcloud.codepack import archive_name, code_location
    from rlcloud.storage import open_store

    parent = location.rstrip("/").rpartition("/")[0]
    places = [code_location(parent), code_location(parent.rpartition("/")[0])]
    for place in places:
        with open_store(place) as store:
            if store.stat(archive_name(digest)) is not None:
                return place
    return places[0]  # fetch says the archive is missing, naming where it looked first


def install_run_code(spec: ExperimentSpec, location: str) -> Path | None:
    """Make the code of the run at ``location`` importable here, as its runner did: the archive its spec of
    record names, fetched from the store into this machine's cache, checked, its requirements installed into
    an overlay (rlcloud.runner.code.install_code). The project folder need not be on this machine. None for a
    run without code (what is importable here is used).

    Raises:
        WorkloadError: the archive is missing or refused; SpecError: its requirements cannot be installed.
    """
    if spec.code is None or spec.code.digest is None:
        return None
    from rlcloud.runenv import RunnerEnv
    from rlcloud.runner.code import install_code

    return install_code(spec, RunnerEnv(code_store=_code_store(location, spec.code.digest)))


def load(spec: ExperimentSpec, store: Store, location: str, checkpoint: str | None = None) -> Policy:
    """The run's trained agent (:class:`rlcloud.runner.policy.Policy`), restored from ``checkpoint`` (default:
    the latest complete one) of the run at ``location``, built from ``spec`` (its spec of record), with the
    run's code made importable first (:func:`install_run_code`)."""
    from rlcloud.runner.policy import load_policy

    install_run_code(spec, location)
    with _checkpoint_dir(store, location, checkpoint) as workdir:
        return load_policy(spec, workdir, checkpoint)


def _suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in VIDEO_FORMATS:
        known = ", ".join(f"{s} ({how})" for s, how in VIDEO_FORMATS.items())
        raise SpecError([SpecProblem("path", f"a video is written by its suffix: {known}", str(path))])
    return suffix


class _Sink:
    """Frames to a GIF or an MP4 by the path's suffix, one at a time: an MP4 is streamed to ffmpeg, a GIF
    keeps each frame at a byte a pixel (its palette) until :meth:`close`. The file is written beside its
    place and renamed: it appears whole or not at all."""

    def __init__(self, path: Path, fps: int) -> None:
        self.suffix = _suffix(path)
        self.path = path
        self.fps = fps
        self.count = 0
        self.tmp = path.with_name(f".{path.name}.partial{self.suffix}")
        self._images: list[Any] = []
        self._writer: Any = None
        if self.suffix == ".mp4":
            try:
                import imageio.v2 as imageio
            except ImportError:
                raise SpecError(
                    [SpecProblem("path", "an MP4 needs imageio and imageio-ffmpeg: pip install 'rlcloud[video]'")]
                ) from None
            # macro_block_size 1: frames of any size, not only multiples of 16 (Atari's 210 x 160)
            self._writer = imageio.get_writer(self.tmp, fps=fps, codec="libx264", macro_block_size=1)

    def __call__(self, frame: Any) -> None:
        self.count += 1
        if self._writer is not None:
            self._writer.append_data(frame)
            return
        from PIL import Image

        self._images.append(Image.fromarray(frame).convert("P", palette=Image.Palette.ADAPTIVE))

    def close(self, keep: bool) -> None:
        """Finish the file and move it into place (``keep``), or remove what was written."""
        try:
            if self._writer is not None:
                self._writer.close()
            elif keep and self._images:
                # GIF delays are in milliseconds here, hundredths of a second in the file. Disposal 2 keeps
                # every frame: Pillow merges a frame equal to the one before into it otherwise, and a GIF
                # of N steps has N frames (each frame covers the whole picture, so it looks the same).
                first, *rest = self._images
                first.save(
                    self.tmp,
                    save_all=True,
                    append_images=rest,
                    duration=round(1000 / self.fps),
                    loop=0,
                    disposal=2,
                )
            if keep:
                if not self.count:
                    raise SpecError([SpecProblem("episodes", "no frame to write")])
                os.replace(self.tmp, self.path)
        finally:
            self._images.clear()
            with contextlib.suppress(FileNotFoundError):
                self.tmp.unlink()


def render(
    policy: Policy,
    path: str | os.PathLike[str],
    *,
    episodes: int = 1,
    seed: int | None = None,
    fps: int = DEFAULT_FPS,
    progress: Callable[[int], None] | None = None,
) -> Video:
    """Play ``episodes`` episodes of ``policy`` and write them as one video to ``path`` (.gif or .mp4).

    ``seed``: the environment's seed (default: the run's evaluation seed). ``progress`` is called with the
    steps played so far.
    """
    target = Path(path)
    _suffix(target)  # a bad suffix is refused before anything is played
    if fps < 1 or fps > 240:
        raise SpecError([SpecProblem("fps", "frames per second: 1 to 240", fps)])
    target.parent.mkdir(parents=True, exist_ok=True)
    sink = _Sink(target, fps)
    done = False
    try:
        played = policy.episodes(episodes, seed=seed, on_frame=sink, on_step=progress)
        done = True
    finally:
        sink.close(keep=done)
    return Video(
        path=target,
        returns=[e.ret for e in played],
        lengths=[e.length for e in played],
        checkpoint=policy.checkpoint,
        frames=sink.count,
    )
