"""Pure steps of connected components by large-star / small-star (Kiveris et al., SoCC 2014).

The graph is a set of undirected edges between document ids. Each round applies one
large-star and one small-star step; both preserve connectivity, and once nothing changes
every component is a star around its smallest id. The number of rounds needed grows as
O(log^2 n) in the worst case; near-duplicate graphs are shallow (mostly stars and short
chains), and the Beam shell counts the nodes not yet attached to a root after the last round
(`unconverged`) so a too-small round count is visible, never silent.

These reducers see one node's neighbourhood at a time, which is what a Beam GroupByKey
hands them; no step needs the whole edge list on one machine.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator


def large_star(u: str, neighbours: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Attach every larger neighbour of u to the smallest node of u's neighbourhood."""
    nbrs = set(neighbours)
    m = min(nbrs | {u})
    for v in nbrs:
        if v > u:
            yield v, m


def small_star(u: str, smaller_neighbours: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Attach u and its smaller neighbours to the smallest of them."""
    group = set(smaller_neighbours) | {u}
    m = min(group)
    for v in group:
        if v != m:
            yield v, m


def both_directions(edge: tuple[str, str]) -> Iterator[tuple[str, str]]:
    u, v = edge
    yield u, v
    yield v, u


def toward_larger(edge: tuple[str, str]) -> tuple[str, str]:
    """Key an edge by its larger end (small-star groups each node with its smaller neighbours)."""
    u, v = edge
    return (u, v) if v < u else (v, u)


def components_local(edges: Iterable[tuple[str, str]], rounds: int = 20) -> dict[str, str]:
    """Reference implementation on one machine, for tests: node -> smallest id of its component."""
    edges = {tuple(sorted(e)) for e in edges if e[0] != e[1]}
    for _ in range(rounds):
        adj: dict[str, set[str]] = {}
        for u, v in edges:
            adj.setdefault(u, set()).add(v)
            adj.setdefault(v, set()).add(u)
        ls = {(a, b) for u, n in adj.items() for a, b in large_star(u, n) if a != b}
        small: dict[str, set[str]] = {}
        for e in ls:
            k, v = toward_larger(e)
            small.setdefault(k, set()).add(v)
        new = {(a, b) for u, n in small.items() for a, b in small_star(u, n)}
        new = {tuple(sorted(e)) for e in new}
        if new == edges:
            break
        edges = new
    return {max(e): min(e) for e in edges}
