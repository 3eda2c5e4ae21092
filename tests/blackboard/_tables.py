"""Hand-built tables shared by the blackboard tests (CSV text, so pandas reads the same)."""

from __future__ import annotations

import io

import pandas as pd

from jaxlab.blackboard import Table
from jaxlab.blackboard._table import parse_csv

CSV = {
    "shop/sales": (
        "store,region,units,price,day\n"
        "s1,north,10,2.5,1\n"
        "s2,south,3,4.0,1\n"
        "s3,north,7,,2\n"
        "s1,north,NA,3.0,2\n"
        "s4,east,12,1.5,3\n"
        "s2,south,5,2.0,3\n"
        "s5,,8,2.2,4\n",
        "Weekly retail sales of a small chain of shops",
    ),
    "shop/stores": (
        "store,city,size\ns1,Leeds,120\ns2,York,80\ns3,Hull,95\ns4,Leeds,60\n",
        "Shops of the chain with their city and floor area",
    ),
    "shop/cities": (
        "city,country\nLeeds,England\nYork,England\nHull,Scotland\n",
        "Cities and the country each lies in",
    ),
    "zoo/animals": (
        "animal,legs,mass\ncat,4,4.1\nhen,2,2.0\nant,6,0.0001\ndog,4,20.5\nemu,2,40.2\n",
        "Body mass and leg count of zoo animals",
    ),
}


def table(name: str) -> Table:
    text, title = CSV[name]
    cols, dt = parse_csv(text.encode(), file=name)
    return Table(
        name=name,
        columns=cols,
        dtypes=dt,
        title=title,
        source=name.split("/")[0],
        partition=name.split("/")[0],
    )


def tables() -> dict[str, Table]:
    return {n: table(n) for n in CSV}


def frame(name: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(CSV[name][0]))
