"""Large-star / small-star connected components (pure reference) against union-find."""
from __future__ import annotations

import random

from pipelines.corpus.graph import components_local, large_star, small_star


def union_find(edges, nodes):
    parent = {n: n for n in nodes}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for u, v in edges:
        a, b = find(u), find(v)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return {n: find(n) for n in nodes}


def test_steps():
    assert sorted(large_star("b", ["a", "c", "d"])) == [("c", "a"), ("d", "a")]
    assert sorted(small_star("d", ["b", "c"])) == [("c", "b"), ("d", "b")]


def test_random_graphs_match_union_find():
    rng = random.Random(0)
    for _ in range(200):
        nodes = [f"{i:03d}" for i in range(rng.randint(2, 40))]
        edges = [tuple(rng.sample(nodes, 2)) for _ in range(rng.randint(1, 2 * len(nodes)))]
        ref = union_find(edges, nodes)
        assert components_local(edges) == {k: v for k, v in ref.items() if k != v}
