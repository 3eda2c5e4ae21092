"""Claim-checking experiments and benchmarks; run as `python -m experiments`.

One module per headline claim (see `experiments._api` for the contract);
benchmarks in `experiments.bench`.
"""
