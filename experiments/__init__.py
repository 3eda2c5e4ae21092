"""Claim-checking experiments and benchmarks; run from the repository as `python -m experiments`.

One subpackage per component, one module per headline claim (`experiments/cells/rare.py`
is the experiment `cells_rare`), the component's shared set-up in its `_setup.py`;
benchmarks in `experiments/bench/`; the harness (contract, runner, report) in
`experiments/_harness/`. Not installed with the jaxlab wheel.
"""
