"""Loader for real EM stacks a user already has on disk (HDF5 / TIFF); never downloads.

CREMI volumes are HDF5 files with the raw image under `volumes/raw` and the
neuron instance labels under `volumes/labels/neuron_ids`; SNEMI3D / ISBI-style
data come as multi-page TIFF stacks (raw and labels in separate files). Both
load as `(raw float32 [Z, H, W] in [0, 1], labels integer [Z, H, W] | None)`.

Paper: P11 (evaluation on real EM data sets when available).
"""

from __future__ import annotations

import contextlib
import logging
import os

import numpy as np

__all__ = ["load_em_volume"]

_HDF5_EXT = (".h5", ".hdf5", ".hdf")
_TIFF_EXT = (".tif", ".tiff")
_DEFAULT_LABELS_KEY = "volumes/labels/neuron_ids"


class _Default(str):
    """Marks the default labels key: missing -> no labels instead of an error."""


def _kind(path: str, name: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext in _HDF5_EXT:
        return "hdf5"
    if ext in _TIFF_EXT:
        return "tiff"
    raise ValueError(
        f"{name}: unknown file extension {ext!r} of {path!r}; expected one of "
        f"{_HDF5_EXT + _TIFF_EXT}"
    )


def _read(path: str, name: str, key: str | None, *, optional: bool) -> np.ndarray | None:
    if not os.path.isfile(path):
        raise ValueError(f"{name}: no such file {path!r}")
    if _kind(path, name) == "tiff":
        import tifffile

        try:
            with _tiff_warnings() as warned, tifffile.TiffFile(path) as tif:
                if not tif.series:
                    raise ValueError("no image in the file")
                series = tif.series[0]
                pages_ok = not warned  # a broken IFD chain is only logged: pages go missing
                _check_tiff_sizes(series, os.path.getsize(path), path, name)
                if not pages_ok:
                    raise ValueError(f"damaged page structure ({warned[0]})")
                out = np.asarray(series.asarray())
                if warned:
                    raise ValueError(f"damaged image data ({warned[0]})")
                return out
        except _Refused:
            raise
        except Exception as err:  # tifffile raises several types on malformed files
            raise ValueError(f"{name}: cannot read TIFF file {path!r}: {err}") from err
    import h5py

    key = str(key)
    try:
        with h5py.File(path, "r") as f:
            return _read_hdf5(f, key, path, name, optional=optional)
    except _Refused:
        raise
    except Exception as err:  # h5py raises OSError, KeyError, RuntimeError, ... on damage
        raise ValueError(f"{name}: cannot read HDF5 file {path!r}: {err}") from err


def _read_hdf5(f, key: str, path: str, name: str, *, optional: bool) -> np.ndarray | None:
    """Dataset `key` of the open file `f`, after the link, storage and size checks; every
    refusal is a `_Refused` naming the file (other errors are h5py's, mapped by `_read`)."""
    import h5py

    _check_link(f, key, path, name)
    if key not in f:
        _check_listed(f, key, path, name)
        if optional:
            return None
        raise _Refused(f"{name}: HDF5 file {path!r} has no dataset {key!r}")
    obj = f[key]
    if not isinstance(obj, h5py.Dataset):
        raise _Refused(f"{name}: {key!r} in {path!r} is a group, not a dataset")
    _check_storage(obj, key, path, name)
    return np.asarray(obj[()])


# A dataset may declare at most this many bytes per byte it actually stores (chunked,
# compressed EM labels reach ~100x; an unwritten dataset of fill values stores nothing).
_MAX_EXPANSION = 10_000
_MAX_BYTES = 64 << 30


def _check_link(f, key: str, path: str, name: str) -> None:
    """Refuse external links anywhere on the path to `key` (they read other files)."""
    import h5py

    parts = key.strip("/").split("/")
    for i in range(len(parts)):
        sub = "/".join(parts[: i + 1])
        link = f.get(sub, getlink=True)
        if isinstance(link, h5py.ExternalLink):
            raise _Refused(
                f"{name}: {sub!r} in {path!r} is an external link to "
                f"{link.filename!r}; readers are confined to the given file"
            )


def _check_listed(f, key: str, path: str, name: str) -> None:
    """A name that a group lists but a lookup does not find is a damaged group index
    (version-1 group B-trees have no checksum): refuse it rather than read a missing
    optional dataset as absent."""
    import h5py

    group = f
    for part in key.strip("/").split("/"):
        if part in group:
            group = group[part]
            if not isinstance(group, h5py.Group):
                return
        else:
            if part in list(group):
                raise _Refused(
                    f"{name}: HDF5 file {path!r} lists {part!r} in {group.name!r} but a lookup "
                    "does not find it (a damaged group index)"
                )
            return


def _check_storage(obj, key: str, path: str, name: str) -> None:
    """Refuse external/virtual storage and sizes the file cannot hold (fill-value bombs)."""
    if obj.external:
        raise _Refused(
            f"{name}: {key!r} in {path!r} stores its data in external files "
            f"{[e[0] for e in obj.external][:3]}; readers are confined to the given file"
        )
    if obj.is_virtual:
        raise _Refused(
            f"{name}: {key!r} in {path!r} is a virtual dataset (it maps other files); "
            "readers are confined to the given file"
        )
    declared = int(np.prod(obj.shape, dtype=np.float64)) * obj.dtype.itemsize
    stored = int(obj.id.get_storage_size())
    if declared > _MAX_BYTES or (declared > 1 << 26 and declared > _MAX_EXPANSION * max(stored, 1)):
        raise _Refused(
            f"{name}: {key!r} in {path!r} declares {declared} bytes of shape {obj.shape} but "
            f"stores {stored}; refusing to allocate what the file merely claims"
        )
    if obj.chunks is not None:
        _check_chunks(obj, key, path, name)


def _check_chunks(obj, key: str, path: str, name: str) -> None:
    """Every stored chunk must sit on the dataset's chunk grid, inside its shape, and its
    bytes inside the file. HDF5's version-1 chunk index has no checksum: a damaged chunk
    key otherwise moves a chunk outside the array and the read returns fill values in its
    place, silently."""
    shape, chunks = obj.shape, obj.chunks
    grid = int(np.prod([-(-s // c) for s, c in zip(shape, chunks, strict=True)], dtype=np.float64))
    n = int(obj.id.get_num_chunks())
    if n > grid:
        raise _Refused(
            f"{name}: {key!r} in {path!r} indexes {n} chunks, more than the {grid} chunks "
            f"of its shape {shape} (a damaged chunk index)"
        )
    size = os.path.getsize(path)
    n_filters = obj.id.get_create_plist().get_nfilters()
    chunk_bytes = int(np.prod(chunks)) * obj.dtype.itemsize
    bad: list[str] = []

    def visit(info) -> None:
        where = f"chunk at {info.chunk_offset} stored at bytes [{info.byte_offset}, " + (
            f"{info.byte_offset + info.size})"
        )
        on_grid = all(
            o % c == 0 and o < s for o, c, s in zip(info.chunk_offset, chunks, shape, strict=True)
        )
        if not on_grid or not (info.byte_offset >= 0 and info.byte_offset + info.size <= size):
            bad.append(f"{where} outside its shape {shape} or its file of {size} bytes")
        elif info.filter_mask >> n_filters or (
            info.filter_mask == (1 << n_filters) - 1 and info.size != chunk_bytes
        ):
            # a mask skipping every filter (or none stated) must leave raw chunk bytes
            bad.append(
                f"{where} with filter mask {info.filter_mask:#x} over {n_filters} filters "
                f"and {info.size} bytes for a chunk of {chunk_bytes}"
            )
        else:
            # the read looks chunks up by their keys, the listing walks the index: a key
            # that no longer sorts right is listed but read as fill values
            try:
                mask, stored = obj.id.read_direct_chunk(info.chunk_offset)
            except RuntimeError as err:
                bad.append(f"{where} that a lookup by its coordinates does not find ({err})")
                return
            if (mask, len(stored)) != (info.filter_mask, info.size):
                bad.append(f"{where} that a lookup by its coordinates finds elsewhere")

    obj.id.chunk_iter(lambda info: None if bad else visit(info))
    if bad:
        raise _Refused(
            f"{name}: {key!r} in {path!r} has a {bad[0]} (a damaged chunk index or filter pipeline)"
        )


@contextlib.contextmanager
def _tiff_warnings():
    """The warnings tifffile logs meanwhile: it logs, and carries on past, a broken IFD
    chain (the stack silently loses pages) or a corrupted tag list."""
    records: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("tifffile")
    handler = _Collect(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


class _Refused(ValueError):
    """A file refused before reading (its message already names the file)."""


def _check_tiff_sizes(series, file_size: int, path: str, name: str) -> None:
    """Check what a TIFF declares against what the file can hold, before allocating.

    Every strip/tile must lie inside the file; uncompressed data cannot declare more
    bytes than the file has; compressed data at most `_MAX_EXPANSION` times the file size
    (above 64 MiB), and nothing more than `_MAX_BYTES`.
    """
    declared = int(np.prod(series.shape, dtype=np.float64)) * np.dtype(series.dtype).itemsize
    compressed = False
    for page in series.pages:
        if page is None:
            continue
        compressed |= int(page.compression) != 1
        for off, count in zip(page.dataoffsets, page.databytecounts, strict=False):
            if off < 0 or count < 0 or off + count > file_size:
                raise _Refused(
                    f"{name}: TIFF file {path!r} has image data at bytes [{off}, {off + count}) "
                    f"beyond its size {file_size} (truncated or corrupted)"
                )
    too_big = declared > _MAX_BYTES or (
        declared > file_size
        if not compressed
        else declared > 1 << 26 and declared > _MAX_EXPANSION * max(file_size, 1)
    )
    if too_big:
        raise _Refused(
            f"{name}: TIFF file {path!r} declares {declared} bytes of shape "
            f"{tuple(series.shape)} but is {file_size} bytes long; refusing to allocate "
            "what the file merely claims"
        )


def _as_volume(name: str, arr: np.ndarray) -> np.ndarray:
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3:
        raise ValueError(f"{name}: expected a 2-D image or 3-D stack, received shape {arr.shape}")
    return arr


def _normalise(raw: np.ndarray, name: str = "raw") -> np.ndarray:
    """Integers scale by their dtype's maximum; floats outside [0, 1] are min-max scaled."""
    if raw.dtype == bool:
        return raw.astype(np.float32)
    if np.issubdtype(raw.dtype, np.integer):
        info = np.iinfo(raw.dtype)
        if info.min < 0:
            lo, hi = float(raw.min()), float(raw.max())
            return ((raw - lo) / max(hi - lo, 1.0)).astype(np.float32)
        return (raw / float(info.max)).astype(np.float32)
    if not np.issubdtype(raw.dtype, np.floating):
        raise ValueError(f"{name}: expected an integer or float image, received dtype {raw.dtype}")
    if not np.all(np.isfinite(raw)):
        raise ValueError(f"{name}: expected finite values, received NaN/inf entries")
    lo, hi = float(raw.min()), float(raw.max())
    if lo >= 0.0 and hi <= 1.0:
        return raw.astype(np.float32)
    return ((raw - lo) / (hi - lo if hi > lo else 1.0)).astype(np.float32)


def load_em_volume(
    path,
    *,
    raw_key: str = "volumes/raw",
    labels_key: str | None = _Default(_DEFAULT_LABELS_KEY),
    labels_path=None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Load an EM stack (and its instance labels) from an HDF5 or TIFF file.

    HDF5 (`.h5`, `.hdf5`, `.hdf`; CREMI layout): `raw_key` holds the raw image,
    `labels_key` the labels. With the default `labels_key` a file without labels
    (e.g. a CREMI test volume) gives `labels=None`; an explicitly given key that is
    missing is an error. TIFF (`.tif`, `.tiff`): the file is the raw stack. Labels
    may come from a separate file `labels_path` (HDF5, read at `labels_key`, or TIFF).
    2-D images become stacks of one section. Nothing is ever downloaded.

    **Arguments:**

    - `path`: raw file path.
    - `raw_key`: HDF5 dataset of the raw image.
    - `labels_key`: HDF5 dataset of the labels; `None` -> do not load labels.
    - `labels_path`: optional separate labels file.

    **Returns:** `(raw, labels)`: raw float32 `[Z, H, W]` in `[0, 1]` (integer data
    scaled by the dtype's maximum, float data outside `[0, 1]` min-max scaled);
    labels in their stored integer dtype `[Z, H, W]`, or `None`.

    **Raises:** `ValueError` naming the file for anything it cannot read as given: a
    damaged or truncated file, external links, external or virtual storage (readers are
    confined to the given file), a dataset declaring far more bytes than the file stores
    (checked before allocating), a damaged chunk index (chunks off the grid or outside the
    file, filter masks inconsistent with a chunk's size, listed chunks a lookup misses),
    and contents that are not an integer/finite-float 2-D or 3-D image.

    Paper: P11 (CREMI-style volumes).
    """
    path = os.fspath(path)
    if not isinstance(raw_key, str):
        raise ValueError(f"raw_key: expected a string, received {raw_key!r}")
    raw = _read(path, "path", raw_key, optional=False)
    assert raw is not None  # optional=False raises instead of returning None
    # errors about the contents name the file they come from
    raw_name = f"raw ({path!r})"
    raw = _normalise(_as_volume(raw_name, raw), raw_name)

    labels = None
    labels_name = f"labels ({path!r})"
    if labels_path is not None:
        labels_path = os.fspath(labels_path)
        labels_name = f"labels ({labels_path!r})"
        key = _DEFAULT_LABELS_KEY if labels_key is None else str(labels_key)
        labels = _read(labels_path, "labels_path", key, optional=False)
    elif labels_key is not None and _kind(path, "path") == "hdf5":
        labels = _read(
            path, "labels_key", str(labels_key), optional=isinstance(labels_key, _Default)
        )
    if labels is not None:
        labels = _as_volume(labels_name, labels)
        if not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"{labels_name}: expected an integer dtype, received {labels.dtype}")
        if labels.shape != raw.shape:
            raise ValueError(
                f"{labels_name}: shape {labels.shape} does not match the raw volume {raw.shape}"
            )
    return raw, labels
