"""`load_easy_vqa`: the easy-VQA images and questions of the `easy-vqa` wheel, as arrays.

easy-VQA (Zhou 2020, the vzhou842/easy-VQA repository, MIT) is a synthetic visual
question answering set: 64x64 RGB images of one coloured shape (circle, rectangle,
triangle; 8 colours) on a tinted background, with questions about the shape, its colour
or yes/no questions about either, and 13 possible answers. The wheel ships 4000 train and
1000 test images (PNG) and 38575 / 9673 questions.

The files are located with `importlib.metadata` (`jaxlab.data.wheel_file`); the
`easy_vqa` package is never imported. The decoded images are cached as an `.npz` under
`$JAXLAB_CACHE_DIR/routing/easy_vqa` (default `~/.cache/jaxlab/...`) keyed by the names,
sizes and modification times of the PNG files, so the PNG decodes happen once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import re
from pathlib import Path

import numpy as np

from jaxlab._core import atomic_write, read_json, read_npz, short_repr, wheel_file

__all__ = ["VQAData", "load_easy_vqa", "QUESTION_TYPES"]

_PACKAGE = "easy-vqa"
_PIN = "easy-vqa==1.0"
_IMAGE_SIZE = 64
_CACHE_VERSION = "easy-vqa-images-v1"
_WORD = re.compile(r"[a-z]+")
#: the longest question accepted, in characters (easy-VQA's longest has 42): checked per
#: row before the (questions x words) token matrix is allocated, so one enormous question
#: in a small file cannot drive a multi-GiB allocation
MAX_QUESTION_CHARS = 1000
#: the question types (task groups), in the order of `VQAData.question_type`'s indices
QUESTION_TYPES = ("shape", "colour", "yes_no")
"""The easy-VQA question types (task groups), in the order of `VQAData.question_type`'s
indices."""
_SHAPES = frozenset({"circle", "rectangle", "triangle"})
_YES_NO = frozenset({"yes", "no"})
#: token id 0 pads a question, 1 stands for a word not in the train vocabulary
PAD, UNKNOWN = 0, 1


@dataclasses.dataclass(frozen=True, eq=False)
class VQAData:
    """One split of easy-VQA as arrays (N questions over I images).

    - `images`: (I, 64, 64, 3) uint8 RGB.
    - `image_ids`: (I,) int64, the PNG file numbers (`images/<id>.png`).
    - `questions`: N question texts.
    - `tokens`: (N, L) int32 word ids into `vocabulary` (0 = padding, 1 = unknown word),
      L the longest train question.
    - `answers`: (N,) int32 index into `answer_names` (13 answers).
    - `image_index`: (N,) int32 row of `images` each question is about.
    - `question_type`: (N,) int32 index into `QUESTION_TYPES` ("shape", "colour",
      "yes_no"), read from the answer: a shape name, a colour name, or yes/no.
    - `vocabulary`: the words of the train questions (`vocabulary[0]`, `[1]` are the
      padding and unknown markers).
    - `answer_names`: the 13 answers of `answers.txt`, in file order.
    - `type_names`: `QUESTION_TYPES`.
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    images: np.ndarray
    image_ids: np.ndarray
    questions: tuple[str, ...]
    tokens: np.ndarray
    answers: np.ndarray
    image_index: np.ndarray
    question_type: np.ndarray
    vocabulary: tuple[str, ...]
    answer_names: tuple[str, ...]
    type_names: tuple[str, ...] = QUESTION_TYPES

    @property
    def n_questions(self) -> int:
        """N."""
        return len(self.questions)


def _data_root() -> Path:
    return wheel_file(_PACKAGE, "easy_vqa/data/answers.txt", pin=_PIN).parent


def _cache_root() -> Path:
    return Path(os.environ.get("JAXLAB_CACHE_DIR", Path.home() / ".cache" / "jaxlab"))


def _read_answers(path: Path) -> tuple[str, ...]:
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not a readable answers file ({e})") from e
    answers = tuple(x.strip() for x in lines if x.strip())
    if not answers or len(set(answers)) != len(answers):
        raise ValueError(f"{path}: expected distinct non-empty answers, one a line")
    return answers


def _read_questions(path: Path) -> list[tuple[str, str, int]]:
    try:
        rows = read_json(path)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable questions file ({e})") from e
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{path}: expected a non-empty JSON list of [question, answer, image id]")
    out = []
    for k, row in enumerate(rows):
        ok = (
            isinstance(row, list)
            and len(row) == 3
            and isinstance(row[0], str)
            and isinstance(row[1], str)
            and isinstance(row[2], int)
            and not isinstance(row[2], bool)
            and 0 <= row[2] < 10**9
        )
        if not ok:
            raise ValueError(
                f"{path}: row {k} is not [question, answer, image id >= 0]: {row!r:.120}"
            )
        if len(row[0]) > MAX_QUESTION_CHARS:
            raise ValueError(
                f"{path}: row {k} has a question of {len(row[0])} characters, more than the "
                f"{MAX_QUESTION_CHARS} accepted"
            )
        out.append((row[0], row[1], row[2]))
    return out


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _decode_png(path: Path) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            # the header's size is checked before any pixel is decoded
            if im.size != (_IMAGE_SIZE, _IMAGE_SIZE):
                raise ValueError(
                    f"expected {_IMAGE_SIZE}x{_IMAGE_SIZE} pixels, header says {im.size}"
                )
            return np.asarray(im.convert("RGB"), dtype=np.uint8)
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as e:
        raise ValueError(f"{path}: not a readable easy-VQA image ({e})") from e


def _image_paths(folder: Path, ids: np.ndarray) -> list[Path]:
    root = folder.resolve()
    paths = []
    for i in ids:
        p = (folder / f"{int(i)}.png").resolve()
        if p.parent != root:  # an id is an integer, but a symlinked file could still escape
            raise ValueError(f"{folder / f'{int(i)}.png'}: resolves outside {folder}")
        if not p.is_file():
            raise ValueError(f"{folder / f'{int(i)}.png'}: missing image file")
        paths.append(p)
    return paths


def _decoded_images(folder: Path, ids: np.ndarray, cache: bool) -> np.ndarray:
    paths = _image_paths(folder, ids)
    if not cache:
        return np.stack([_decode_png(p) for p in paths])
    h = hashlib.sha256(_CACHE_VERSION.encode())
    for p in paths:
        st = p.stat()
        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    target = _cache_root() / "routing" / "easy_vqa" / f"{h.hexdigest()[:24]}.npz"
    if target.is_file():
        try:
            stored = read_npz(target, "easy-VQA image cache")
            imgs = stored.get("images")
            if imgs is not None and imgs.shape == (len(ids), _IMAGE_SIZE, _IMAGE_SIZE, 3):
                return imgs.astype(np.uint8)
        except ValueError:
            pass  # a damaged cache file is rebuilt, never trusted
    imgs = np.stack([_decode_png(p) for p in paths])
    buf = io.BytesIO()
    np.savez(buf, images=imgs)
    with atomic_write(target, "wb") as fh:
        fh.write(buf.getvalue())
    return imgs


def _question_type(answer: str) -> int:
    if answer in _YES_NO:
        return QUESTION_TYPES.index("yes_no")
    if answer in _SHAPES:
        return QUESTION_TYPES.index("shape")
    return QUESTION_TYPES.index("colour")


def load_easy_vqa(
    split: str, *, root: str | os.PathLike | None = None, cache: bool = True
) -> VQAData:
    """The questions and decoded images of one easy-VQA split (from the `easy-vqa` wheel).

    The vocabulary and the padded length L come from the train questions for both splits
    (a test word outside it becomes the unknown id 1; a longer test question is cut to L).

    **Arguments:**

    - `split`: `"train"` (38575 questions, 4000 images) or `"test"` (9673, 1000).
    - `root`: the data folder holding `answers.txt` and `{train,test}/questions.json`,
      `{train,test}/images/<id>.png` (default: the installed wheel's `easy_vqa/data`).
    - `cache`: keep the decoded images in an `.npz` under the jaxlab cache folder.

    **Returns:** a `VQAData`.

    **Raises:** `ValueError` naming the file when `answers.txt` or a `questions.json` is
    malformed (not a list of [question, answer, image id] rows, an answer not in
    `answers.txt`, a question longer than `MAX_QUESTION_CHARS`), an image is missing,
    resolves outside its folder, is not a decodable 64x64 PNG; `ValueError` naming
    `split` for another split; `FileNotFoundError` naming the package to install when
    the wheel is missing.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split: expected 'train' or 'test', received {split!r}")
    base = _data_root() if root is None else Path(root)
    answers_path = base / "answers.txt"
    answer_names = _read_answers(answers_path)
    train_rows = _read_questions(base / "train" / "questions.json")
    rows = train_rows if split == "train" else _read_questions(base / split / "questions.json")
    words = sorted({w for q, _, _ in train_rows for w in _words(q)})
    vocabulary = ("<pad>", "<unk>", *words)
    word_id = {w: i for i, w in enumerate(vocabulary)}
    length = max(len(_words(q)) for q, _, _ in train_rows)
    qpath = base / split / "questions.json"
    tokens = np.zeros((len(rows), length), np.int32)
    answers = np.zeros(len(rows), np.int32)
    qtype = np.zeros(len(rows), np.int32)
    answer_id = {a: i for i, a in enumerate(answer_names)}
    for k, (q, a, _) in enumerate(rows):
        if a not in answer_id:
            raise ValueError(f"{qpath}: row {k} has answer {a!r}, not one of {answers_path}")
        ids = [word_id.get(w, UNKNOWN) for w in _words(q)][:length]
        tokens[k, : len(ids)] = ids
        answers[k] = answer_id[a]
        qtype[k] = _question_type(a)
    image_ids = np.unique(np.array([r[2] for r in rows], np.int64))
    image_index = np.searchsorted(image_ids, np.array([r[2] for r in rows])).astype(np.int32)
    images = _decoded_images(base / split / "images", image_ids, cache)
    for a in (images, image_ids, tokens, answers, image_index, qtype):
        a.flags.writeable = False
    return VQAData(
        images=images,
        image_ids=image_ids,
        questions=tuple(q for q, _, _ in rows),
        tokens=tokens,
        answers=answers,
        image_index=image_index,
        question_type=qtype,
        vocabulary=vocabulary,
        answer_names=answer_names,
    )
