"""Our own VQA pool (easy-VQA): the views against NumPy, the models' oracle properties
(a blind model ignores the image; a grey model cannot tell colours of equal luminance),
the FLOP count against a hand count, the fit step, the loader on the real wheel and on
damaged copies, jit = eager, vmap = loop, and bad input."""

from __future__ import annotations

import json
import shutil

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab import routing

LUMA = np.array([0.299, 0.587, 0.114])


def _image(rng, size=8):
    return rng.integers(0, 256, (size, size, 3)).astype(np.uint8)


def _block_mean(x, r):
    out = np.zeros((r, r, x.shape[-1]))
    b = x.shape[0] // r
    for i in range(r):
        for j in range(r):
            out[i, j] = x[i * b : (i + 1) * b, j * b : (j + 1) * b].mean((0, 1))
    return out


def test_views_against_numpy():
    rng = np.random.default_rng(0)
    img = _image(rng)
    x = img / 255.0
    v = routing.VQAView(resolution=2, image_size=8)
    np.testing.assert_allclose(v.apply(img), _block_mean(x, 2), rtol=1e-6)
    grey = routing.VQAView(resolution=8, colour=False, image_size=8).apply(img)
    np.testing.assert_allclose(grey, (x @ LUMA)[..., None], rtol=1e-6)
    crop = routing.VQAView(resolution=4, crop=0.5, image_size=8).apply(img)
    np.testing.assert_allclose(crop, x[2:6, 2:6], rtol=1e-6)
    both = routing.VQAView(resolution=2, colour=False, crop=0.5, image_size=8).apply(img)
    np.testing.assert_allclose(both, _block_mean((x @ LUMA)[2:6, 2:6, None], 2), rtol=1e-6)
    blind = routing.VQAView(blind=True, image_size=8)
    assert blind.apply(img).shape == (0, 0, 0)
    assert blind.name == "blind"
    assert v.name == "colour2"
    assert routing.VQAView(32, crop=0.5).name == "colour32-crop0.5"
    # batched images and floats in [0, 1] give the same views
    batch = np.stack([img, _image(rng)])
    np.testing.assert_allclose(v.apply(batch)[0], v.apply(x.astype(np.float32)), rtol=1e-6)
    # linear in the image: the JVP is the view of the tangent
    t = rng.normal(size=(8, 8, 3)).astype(np.float32)
    _, tangent = jax.jvp(v.apply, (jnp.asarray(x, jnp.float32),), (jnp.asarray(t),))
    np.testing.assert_allclose(tangent, _block_mean(t, 2), rtol=1e-5, atol=1e-6)


def _tiny(view, key, width=2):
    return routing.VQAModel(view, 6, 3, width=width, embed_dim=4, hidden=5, key=key)


def test_blind_model_ignores_the_image(getkey):
    rng = np.random.default_rng(1)
    a, b = _image(rng), _image(rng)
    toks = jnp.array([2, 3, 0, 0], jnp.int32)
    blind = _tiny(routing.VQAView(blind=True, image_size=8), getkey())
    np.testing.assert_array_equal(blind(a, toks), blind(b, toks))
    seeing = _tiny(routing.VQAView(resolution=8, image_size=8), getkey())
    assert not np.allclose(seeing(a, toks), seeing(b, toks))
    # padding tokens do not change the question
    np.testing.assert_allclose(blind(a, toks), blind(a, jnp.array([2, 3, 0, 0, 0, 0])))


def test_vqa_flops_hand_count(getkey):
    # resolution 8: two stride-1 3x3 convs (3->2->4 channels) at 8x8, flatten 4*8*8 -> 5
    m = _tiny(routing.VQAView(resolution=8, image_size=8), getkey())
    convs = 2 * 9 * 3 * 2 * 64 + 2 * 9 * 2 * 4 * 64
    dense = 2 * 256 * 5 + 2 * 4 * 5 + 2 * 15 * 5 + 2 * 5 * 3  # image, question, fuse, head
    assert routing.vqa_flops(m) == convs + dense == 18908
    blind = _tiny(routing.VQAView(blind=True, image_size=8), getkey())
    assert routing.vqa_flops(blind) == 2 * 4 * 5 + 2 * 5 * 5 + 2 * 5 * 3
    # resolution 16: a stride-2 conv to 8x8 first, then a stride-1 conv
    m16 = _tiny(routing.VQAView(resolution=16, image_size=16), getkey())
    assert routing.vqa_flops(m16) == 2 * 9 * 3 * 2 * 64 + 2 * 9 * 2 * 4 * 64 + dense


def _patch_images(colours, n, rng):
    """n 8x8 white images with a centred 4x4 patch of a random colour from `colours`."""
    labels = np.arange(n) % len(colours)
    rng.shuffle(labels)
    imgs = np.ones((n, 8, 8, 3), np.float32)
    imgs[:, 2:6, 2:6] = np.asarray(colours, np.float32)[labels][:, None, None]
    return imgs, labels.astype(np.int32)


def test_fit_learns_colour_and_grey_cannot_tell_equal_luminance(getkey):
    # two colours of (almost exactly) equal BT.601 luminance 0.3794
    red = (0.8, 0.2, 0.2)
    teal = (0.0, (0.8 * 0.299 + 0.2 * 0.587 + 0.2 * 0.114 - 0.9 * 0.114) / 0.587, 0.9)
    assert abs(np.dot(red, LUMA) - np.dot(teal, LUMA)) < 1e-12
    rng = np.random.default_rng(2)
    imgs, y = _patch_images([red, teal], 64, rng)
    toks = np.tile(np.array([[2, 3]], np.int32), (64, 1))  # "what colour"
    idx = np.arange(64, dtype=np.int32)
    test_imgs, test_y = _patch_images([red, teal], 40, rng)
    acc = {}
    for name, view in {
        "colour": routing.VQAView(resolution=8, image_size=8),
        "grey": routing.VQAView(resolution=8, colour=False, image_size=8),
    }.items():
        model = _tiny(view, getkey(), width=4)
        trained, hist = routing.fit_vqa(
            model, imgs, toks, y, idx, key=getkey(), steps=60, batch_size=16,
            optimizer=optax.adam(1e-2),
        )  # fmt: skip
        assert hist.losses.shape == (60,)
        pred = routing.vqa_predict(trained, test_imgs, toks[:40], idx[:40])
        acc[name] = float(np.mean(np.asarray(pred) == test_y))
        if name == "colour":
            assert hist.losses[-10:].mean() < 0.5 * hist.losses[:10].mean()
    assert acc["colour"] == 1.0
    assert acc["grey"] <= 0.5 + 1e-9  # balanced labels, indistinguishable inputs: chance


def test_sample_weights_and_grouping(getkey):
    rng = np.random.default_rng(3)
    imgs = np.stack([_image(rng) for _ in range(3)])
    toks = rng.integers(1, 6, (7, 4)).astype(np.int32)
    ans = rng.integers(0, 3, 7).astype(np.int32)
    idx = np.array([2, 0, 2, 1, 2, 0, 1], np.int32)
    from jaxlab.routing._vqa import _group_by_image

    w = np.arange(1, 8, dtype=np.float32)
    g_tok, g_ans, g_w = _group_by_image(3, toks, ans, idx, w)
    assert g_tok.shape == (3, 3, 4)
    for i in range(3):  # every question in its image's row, in order, then empty slots
        mine = np.flatnonzero(idx == i)
        np.testing.assert_array_equal(g_tok[i, : mine.size], toks[mine])
        np.testing.assert_array_equal(g_ans[i, : mine.size], ans[mine])
        np.testing.assert_array_equal(g_w[i, : mine.size], w[mine])
        assert np.all(g_w[i, mine.size :] == 0)
    model = _tiny(routing.VQAView(resolution=8, image_size=8), getkey())
    with pytest.raises(ValueError, match="sample_weights"):
        routing.fit_vqa(model, imgs, toks, ans, idx, key=getkey(), steps=1, sample_weights=-w)


def test_jit_equals_eager_and_vmap_equals_loop(getkey):
    rng = np.random.default_rng(4)
    imgs = np.stack([_image(rng) for _ in range(3)])
    toks = rng.integers(0, 6, (3, 4)).astype(np.int32)
    model = _tiny(routing.VQAView(resolution=4, crop=0.5, image_size=8), getkey())
    eager = model(imgs[0], toks[0])
    np.testing.assert_allclose(eqx.filter_jit(model)(imgs[0], toks[0]), eager, rtol=1e-5)
    batched = jax.vmap(model)(imgs, toks)
    for i in range(3):
        np.testing.assert_allclose(batched[i], model(imgs[i], toks[i]), rtol=1e-5, atol=1e-6)
    pred = routing.vqa_predict(model, imgs, toks, np.arange(3, dtype=np.int32), batch_size=2)
    np.testing.assert_array_equal(pred, np.argmax(batched, 1))


def test_bad_input_names_the_argument(getkey):
    with pytest.raises(ValueError, match="resolution"):
        routing.VQAView(resolution=3)
    with pytest.raises(ValueError, match="crop"):
        routing.VQAView(crop=0.0)
    with pytest.raises(ValueError, match="images"):
        routing.VQAView(8).apply(np.zeros((32, 32, 3), np.uint8))
    with pytest.raises(ValueError, match="view"):
        routing.VQAModel("colour", 6, key=getkey())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="width"):
        routing.VQAModel(routing.VQAView(8), 6, width=0, key=getkey())
    model = _tiny(routing.VQAView(resolution=8, image_size=8), getkey())
    imgs = np.zeros((2, 8, 8, 3), np.uint8)
    toks = np.ones((3, 4), np.int32)
    with pytest.raises(ValueError, match="image_index"):
        routing.vqa_predict(model, imgs, toks, np.array([0, 1, 2], np.int32))
    with pytest.raises(ValueError, match="tokens"):
        routing.vqa_predict(model, imgs, np.ones(3, np.int32), np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="answers"):
        routing.fit_vqa(
            model, imgs, toks, np.array([0, 1, 9]), np.zeros(3, np.int32), key=getkey(), steps=1
        )
    with pytest.raises(ValueError, match="model"):
        routing.vqa_flops("m")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="split"):
        routing.load_easy_vqa("val")
    enc = routing.ImageEncoder(4, image_size=32, key=getkey())
    with pytest.raises(ValueError, match="images"):
        routing.encode_images(enc, imgs)
    with pytest.raises(ValueError, match="image_size"):
        routing.ImageEncoder(4, image_size=48, key=getkey())


def test_image_encoder(getkey):
    rng = np.random.default_rng(5)
    imgs, _ = _patch_images([(1, 0, 0), (0, 0, 1), (0, 1, 0)], 24, rng)
    imgs = np.kron(imgs, np.ones((1, 4, 4, 1), np.float32))  # 32x32 images
    enc = routing.ImageEncoder(4, image_size=32, key=getkey())
    assert enc.encode(imgs[0]).shape == (4,)
    assert enc(imgs[0]).shape == (3, 32, 32)
    trained, hist = routing.fit_image_encoder(enc, imgs, key=getkey(), steps=40, batch_size=8)
    assert hist.losses[-5:].mean() < hist.losses[:5].mean()
    feats = routing.encode_images(trained, imgs, batch_size=5)
    np.testing.assert_allclose(feats, jax.vmap(trained.encode)(imgs), rtol=1e-5, atol=1e-6)


def test_load_easy_vqa_real_wheel():
    train = routing.load_easy_vqa("train")
    test = routing.load_easy_vqa("test")
    assert train.n_questions == 38575
    assert test.n_questions == 9673
    assert train.images.shape == (4000, 64, 64, 3)
    assert test.images.shape == (1000, 64, 64, 3)
    assert train.images.dtype == np.uint8
    # the wheel's README: 28407 train and 7136 test yes/no questions
    assert routing.QUESTION_TYPES == ("shape", "colour", "yes_no")
    assert np.bincount(train.question_type).tolist() == [5002, 5166, 28407]
    assert np.bincount(test.question_type).tolist() == [1257, 1280, 7136]
    assert len(train.answer_names) == 13
    assert test.vocabulary == train.vocabulary
    assert train.tokens.shape == (38575, 9)
    assert test.tokens.max() < len(train.vocabulary)
    # the types agree with the question texts
    names = np.array(test.answer_names)[test.answers]
    for t, words in ((0, ("shape",)), (1, ("color",)), (2, ("is", "does"))):
        rows = np.flatnonzero(test.question_type == t)
        assert all(any(w in test.questions[k] for w in words) for k in rows)
    assert set(names[test.question_type == 0]) == {"circle", "rectangle", "triangle"}
    assert set(names[test.question_type == 2]) == {"yes", "no"}
    assert np.array_equal(test.image_ids, np.arange(1000))


def _tiny_root(tmp_path):
    """A copy of the wheel's layout with 2 questions over one real image."""
    from jaxlab._core import wheel_file

    src = wheel_file("easy-vqa", "easy_vqa/data/answers.txt").parent
    root = tmp_path / "data"
    for split in ("train", "test"):
        (root / split / "images").mkdir(parents=True)
        shutil.copy(src / split / "images" / "0.png", root / split / "images" / "0.png")
        rows = [["what color is the shape?", "blue", 0], ["is there a circle?", "no", 0]]
        (root / split / "questions.json").write_text(json.dumps(rows))
    shutil.copy(src / "answers.txt", root / "answers.txt")
    return root


def test_damaged_files_raise_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path / "cache"))
    root = _tiny_root(tmp_path)
    d = routing.load_easy_vqa("test", root=root)
    assert d.n_questions == 2
    assert d.images.shape == (1, 64, 64, 3)
    assert d.question_type.tolist() == [1, 2]
    again = routing.load_easy_vqa("test", root=root)  # from the image cache
    np.testing.assert_array_equal(again.images, d.images)
    q = root / "test" / "questions.json"
    for bad in ('[["what", "blue", 0]', '{"a": 1}', '[["what", "blue", "../x"]]', "[[1, 2]]"):
        q.write_text(bad)
        with pytest.raises(ValueError, match="questions.json"):
            routing.load_easy_vqa("test", root=root, cache=False)
    q.write_text(json.dumps([["what color?", "purple", 0]]))  # not one of answers.txt
    with pytest.raises(ValueError, match="questions.json"):
        routing.load_easy_vqa("test", root=root, cache=False)
    q.write_text(json.dumps([["what color?", "blue", 7]]))
    with pytest.raises(ValueError, match="7.png"):
        routing.load_easy_vqa("test", root=root, cache=False)
    q.write_text(json.dumps([["what color?", "blue", 0]]))
    png = root / "test" / "images" / "0.png"
    png.write_bytes(png.read_bytes()[:40])  # truncated
    with pytest.raises(ValueError, match="0.png"):
        routing.load_easy_vqa("test", root=root, cache=False)
    from PIL import Image

    Image.new("RGB", (65, 64)).save(png)  # wrong size
    with pytest.raises(ValueError, match="0.png"):
        routing.load_easy_vqa("test", root=root, cache=False)
    (root / "answers.txt").write_text("")
    with pytest.raises(ValueError, match="answers.txt"):
        routing.load_easy_vqa("test", root=root, cache=False)


def test_committed_vqa_table():
    from experiments.routing import _vqa_setup as setup

    cfg = setup.VQATableConfig()
    t = setup.vqa_table(cfg)  # the committed file (a rebuild would train: not here)
    assert t.meta["code"] == setup.CODE_VERSION
    assert t.meta["config"] == setup.table_fields(cfg)
    assert t.quality.shape == (3 * cfg.per_type, len(cfg.members))
    assert set(np.unique(t.quality)) <= {0.0, 1.0}
    assert t.candidates == tuple(m.name for m in cfg.members)
    assert np.bincount(t.groups).tolist() == [cfg.per_type] * 3
    test = routing.load_easy_vqa("test")
    rows = np.array([int(q.split("/")[1]) for q in t.query_ids])
    np.testing.assert_array_equal(rows, setup.select_queries(test, cfg))
    np.testing.assert_array_equal(t.groups, test.question_type[rows])
    # cost: the FLOPs of each member's architecture (shapes only: an untrained model)
    for j, m in enumerate(cfg.members):
        model = routing.VQAModel(
            m.view(), len(test.vocabulary), width=m.width, key=jax.random.key(0)
        )
        np.testing.assert_allclose(t.cost[:, j], routing.vqa_flops(model) / 1e6)
        assert t.meta["members"][m.name]["flops"] == routing.vqa_flops(model)
    # features: image feature, then the hashed bag of words of the question text
    bow = routing.hashed_bow([test.questions[i] for i in rows], dim=cfg.question_dim)
    np.testing.assert_allclose(t.features[:, cfg.encoder_dim :], bow)
    assert t.features.shape == (t.n_queries, cfg.encoder_dim + cfg.question_dim)
    np.testing.assert_array_equal(t.input_tokens[:, 0], (test.tokens[rows] != 0).sum(1))
    assert np.all(t.output_tokens == 1)


@pytest.mark.slow
def test_tiny_vqa_table_build_and_cache(tmp_path, monkeypatch):
    from experiments.routing import _vqa_setup as setup

    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path))
    cfg = setup.VQATableConfig(
        members=setup.POOL[:2], steps=3, encoder_steps=2, per_type=4, latency_batch=5
    )
    t = setup.build_vqa_table(cfg)
    assert t.quality.shape == (12, 2)
    assert t.meta["train_seconds_this_call"] > 0
    # a second build reads every trained member and the encoder from the cache
    monkeypatch.setattr(routing, "fit_vqa", None)
    monkeypatch.setattr(routing, "fit_image_encoder", None)
    u = setup.build_vqa_table(cfg)
    assert u.meta["train_seconds_this_call"] == 0
    np.testing.assert_array_equal(u.quality, t.quality)
    np.testing.assert_allclose(u.features, t.features)
