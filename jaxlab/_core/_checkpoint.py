"""Checkpoints and result files written atomically (temp file + `os.replace`), and
`read_npz`, the one reader of `.npz` files that trusts nothing.

An interrupted write never leaves a half-written file: the previous version
stays in place until the new one is complete on disk.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

import equinox as eqx
import numpy as np

__all__ = [
    "atomic_write",
    "remove_stale_temps",
    "write_json",
    "save_checkpoint",
    "load_checkpoint",
    "read_npz",
    "Checkpointer",
]

T = TypeVar("T")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _fsync_dir(path: Path) -> None:
    """Make a rename inside `path` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# `.{target}.{pid}.{random}.tmp`: the writer's pid tells a killed writer's leftover from a
# write in progress (mkstemp's random part has no dots)
_TEMP = re.compile(r"^\.(?P<target>.+)\.(?P<pid>\d+)\.[^.]+\.tmp$")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True  # another thread of this process may be writing
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: a live process of another user
        return True
    return True


def remove_stale_temps(folder: str | os.PathLike, target: str | None = None) -> list[Path]:
    """Delete the temp files that killed `atomic_write`s left in `folder`.

    A temp file is stale when the process that created it (its pid is in the name) is no
    longer running; temp files of live writers are kept. `target` limits the sweep to the
    temp files of one file name.

    **Arguments:**

    - `folder`: the directory to sweep (not recursive; a missing one is empty).
    - `target`: only the temp files of this file name (None: every target).

    **Returns:** the paths removed.
    """
    folder = Path(folder)
    removed = []
    if not folder.is_dir():
        return removed
    for p in folder.glob(".*.tmp"):
        m = _TEMP.match(p.name)
        if m is None or (target is not None and m["target"] != target):
            continue
        if not _alive(int(m["pid"])):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
                removed.append(p)
    return removed


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temp file beside `path`; on clean exit fsync, `os.replace` it, fsync the folder.

    If the body raises, the temp file is removed and `path` is untouched. The file gets
    the usual permissions (0666 minus the umask), not `mkstemp`'s 0600. Temp files of
    earlier writes of `path` whose process was killed are removed first
    (`remove_stale_temps`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path.parent, path.name)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~_umask())
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Serialise `obj` to JSON fully in memory, then write it atomically."""
    text = json.dumps(obj, indent=2, sort_keys=False, allow_nan=True)
    with atomic_write(path, "w") as f:
        f.write(text)
        f.write("\n")


# what reading a damaged .npz can raise: zipfile's BadZipFile (bad signature, CRC,
# truncation), NotImplementedError (a compression-method field changed to one zipfile
# lacks), RuntimeError (the "encrypted" flag bit set), zlib.error / EOFError (a member
# marked deflated), struct.error, OSError, and numpy's ValueError on a damaged .npy header
_NPZ_ERRORS = (
    OSError,
    EOFError,
    ValueError,
    KeyError,
    TypeError,
    RuntimeError,
    NotImplementedError,
    OverflowError,
    zipfile.BadZipFile,
    zlib.error,
    struct.error,
)


def _check_member_sizes(archive: zipfile.ZipFile, max_bytes: int) -> None:
    """Refuse, before anything is allocated, an archive whose members would inflate to
    more than `max_bytes` in all, or whose `.npy` header claims a different array size
    than the member holds (numpy allocates the header's shape before reading: a small
    compressed file could otherwise ask for any amount of memory)."""
    infos = archive.infolist()
    total = sum(info.file_size for info in infos)
    if total > max_bytes:
        raise ValueError(
            f"its members would inflate to {total} bytes, more than the limit {max_bytes}"
        )
    for info in infos:
        with archive.open(info) as member:
            version = np.lib.format.read_magic(member)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(member)
            elif version == (2, 0):
                shape, _, dtype = np.lib.format.read_array_header_2_0(member)
            else:
                raise ValueError(f"member {info.filename}: unsupported .npy version {version}")
            header = member.tell()
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if header + nbytes != info.file_size:
            raise ValueError(
                f"member {info.filename}: its header claims {nbytes} bytes of data for shape "
                f"{shape}, the member holds {info.file_size - header}"
            )


def read_npz(
    path: str | os.PathLike, what: str = "an .npz file", *, max_bytes: int = 2**34
) -> dict[str, np.ndarray]:
    """Every array of the `.npz` archive at `path`, read without pickle.

    **Arguments:**

    - `path`: the file (opened and closed here, also when reading fails).
    - `what`: what the file should be, for the error message.
    - `max_bytes`: the most the members may inflate to in all (default 16 GiB); checked,
        with each `.npy` header's claimed size against its member's, before reading.

    **Returns:** name -> array, all read into memory.

    **Raises:** `ValueError` naming the file when it is missing, truncated, damaged
    (every zip-level failure: bad signature or CRC, an unknown compression method or the
    encryption flag in a header), holds pickled objects, claims more than `max_bytes`, or
    has a `.npy` header whose shape disagrees with its member's size.
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            z = np.load(fh, allow_pickle=False)
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise ValueError("a single .npy array, not an .npz archive")
            with z:
                if z.zip is None:
                    raise ValueError("the archive is closed")
                _check_member_sizes(z.zip, max_bytes)
                return {k: z[k] for k in z.files}
    except _NPZ_ERRORS as e:
        raise ValueError(f"{path}: not a readable {what} ({type(e).__name__}: {e})") from e


def save_checkpoint(path: str | os.PathLike, tree: Any) -> None:
    """Save the array leaves of a pytree with `eqx.tree_serialise_leaves`, atomically."""
    with atomic_write(path, "wb") as f:
        eqx.tree_serialise_leaves(f, tree)


def load_checkpoint(path: str | os.PathLike, like: T) -> T:
    """Load leaves saved by `save_checkpoint` into a pytree shaped like `like`.

    Raises `FileNotFoundError` naming the path if it does not exist, and
    `ValueError` if the file does not match the structure of `like`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        with open(path, "rb") as f:
            return eqx.tree_deserialise_leaves(f, like)
    except (RuntimeError, ValueError, OSError, EOFError) as e:
        raise ValueError(f"checkpoint {path} does not match the expected structure: {e}") from e


@dataclasses.dataclass(frozen=True)
class Checkpointer:
    """Where and how often a training run saves its state, and whether it resumes.

    **Arguments:**

    - `path`: the checkpoint file (written atomically with `save_checkpoint`).
    - `every`: save after every `every` steps (None: after every chunk of the driver).
    - `resume`: continue from `path` when it exists (False: start afresh and overwrite).

    Passed to `jaxlab._core.run_steps`; experiments get one from `ctx.checkpointer(tag)`.
    """

    path: Path
    every: int | None = None
    resume: bool = False

    def __post_init__(self):
        object.__setattr__(self, "path", Path(self.path))
        if self.every is not None and (
            isinstance(self.every, bool) or not isinstance(self.every, int) or self.every < 1
        ):
            raise ValueError(f"every: expected a positive int or None, received {self.every!r}")

    def exists(self) -> bool:
        """Whether a checkpoint file is there."""
        return self.path.is_file()

    def save(self, tree: Any) -> None:
        """Save the array leaves of `tree` atomically."""
        save_checkpoint(self.path, tree)

    def load(self, like: T) -> T:
        """Load into a pytree shaped like `like` (`ValueError` if the file does not match)."""
        return load_checkpoint(self.path, like)
