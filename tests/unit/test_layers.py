"""The house plan's import rules (docs/ARCHITECTURE.md), read from the source: no import circle between modules,
and no import from a lower layer to a higher one. Imports inside functions count as much as those at the top:
a circle hidden in a function is still a circle."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("common", "schemas", "pipelines", "training", "flows", "bench", "lmforge")
"""Bottom first: a package may import its own layer and those before it, never one after it."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in LAYERS for p in (ROOT / pkg).rglob("*.py")}


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports anywhere in its file (`from pkg import mod` counts as pkg.mod)."""
    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {resolve(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            for a in node.names:
                found.add(resolve(f"{base}.{a.name}") if f"{base}.{a.name}" in known else resolve(base))
    return {m for m in found if m and m != name}


def graph() -> dict[str, set[str]]:
    known = project_modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_walk_sees_the_imports_it_must_see():
    edges = graph()
    assert "training.models.model_formats" in edges["training.compression.compress"]  # a top-level import
    assert "training.evaluation.probing" in edges["training.evaluation.card"]  # one inside a function
    assert "pipelines.labeled.vader" in edges["pipelines.labeled.registry"]  # `from package import module`
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles():
    assert circles(graph()) == []


def test_no_import_runs_back_up_a_layer():
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    upward = sorted(f"{m} -> {o}" for m, out in graph().items() for o in out
                    if rank[o.split(".")[0]] > rank[m.split(".")[0]])
    assert upward == []


TRAINING = ("runtime", "models", "pretraining", "launch", "finetuning", "compression", "evaluation", "doctor")
"""training/'s subpackages, bottom first (training/__init__.py): each may import those before it, never one after."""
TRAINING_MAY_NOT = {"evaluation": {"launch"}}
"""Beyond the order: pairs the order allows that the house plan still keeps apart (a card launches no training)."""


def test_training_is_subpackages_by_responsibility():
    top = sorted(p.name for p in (ROOT / "training").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists())
    assert top == sorted(["__init__.py", *TRAINING]), "a module at training/'s top level: give it its subpackage"
    assert all((ROOT / "training" / sub / "__init__.py").read_text().startswith('"""') for sub in TRAINING)


def test_no_training_import_runs_back_up_a_subpackage():
    rank = {sub: i for i, sub in enumerate(TRAINING)}

    def sub(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if parts[0] == "training" and len(parts) > 2 else None

    wrong = sorted(f"{m} -> {o}" for m, out in graph().items() if sub(m) for o in out if sub(o)
                   and (rank[sub(o)] > rank[sub(m)] or sub(o) in TRAINING_MAY_NOT.get(sub(m), ())))
    assert wrong == []


BENCH = ("kit", "corpus", "data", "train", "transfer")
"""bench/'s subpackages (bench/__init__.py): each may import `kit` and the layers below bench, never another
subpackage; `kit` imports none of them."""
BENCH_TOP = ("__init__.py", "registry.py")
"""bench/'s top level besides them: the package's docstring and the table of benches (which imports no bench)."""
BENCH_MAY = {}
"""Edges between two subpackages the rule would refuse but the house plan allows, each with why: none so far (what
two subpackages share goes into kit, as `device_facts` did from bench gpu for bench transfer --gpu)."""


def test_bench_is_subpackages_by_responsibility():
    top = sorted(p.name for p in (ROOT / "bench").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists())
    assert top == sorted([*BENCH_TOP, *BENCH]), "a module at bench/'s top level: give it its subpackage"
    assert all((ROOT / "bench" / sub / "__init__.py").read_text().startswith('"""') for sub in BENCH)


def test_no_bench_subpackage_imports_another():
    def sub(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if parts[0] == "bench" and len(parts) > 2 else None

    edges = graph()
    # a subpackage's own modules and kit's (so kit, whose own are kit's, imports no other subpackage); bench itself
    # and bench.registry are the CLI's, not a bench's
    wrong = sorted(f"{m} -> {o}" for m, out in edges.items() if sub(m) for o in out if o.split(".")[0] == "bench"
                   and sub(o) not in (sub(m), "kit") and sub(o) not in BENCH_MAY.get(sub(m), set()))
    assert wrong == []
    # lmforge/cli.py reads the registry for every `lmforge bench`: it imports no bench, so none of their libraries
    assert {o for o in edges["bench.registry"] if o.split(".")[0] == "bench"} == set()


FLOWS = ("stages", "ablation", "deploy")
"""flows/'s subpackages (flows/__init__.py); its top level is a part of its own, named "" below."""
FLOWS_TOP = ("__init__.py", "artifacts.py", "credentials.py", "dag.py", "data_root.py", "form.py", "params.py", "presets.py",
             "refresh.py", "run_cli.py")
"""flows/'s top level besides them: the flows a deployment runs and what they share. A new module goes into the
subpackage of its responsibility, or here with the issue's word (the house plan keeps about ten)."""
FLOWS_MAY = {"stages": set(), "": {"stages"}, "ablation": {"", "stages"}, "deploy": {"", "stages", "ablation"}}
"""What each part of flows may import besides its own modules: `stages` nothing (the CLI and bench read the stage
table and run stages without the flows), the top level `stages` (the DAG's tasks launch stages), `ablation` the top
level and `stages` (its arms reuse the DAG's tasks), `deploy` anything (it deploys and checks the flows). So nothing
in flows imports `deploy`, and neither the top level nor `stages` imports `ablation` (the CLI, above flows, does)."""


def flows_part(module: str) -> str | None:
    """The part of flows a module belongs to: a subpackage's name, "" for the top level, None outside flows."""
    parts = module.split(".")
    if parts[0] != "flows":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in FLOWS else ""


def test_flows_is_subpackages_by_responsibility():
    top = sorted(p.name for p in (ROOT / "flows").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists())
    assert top == sorted([*FLOWS_TOP, *FLOWS]), "a module at flows/'s top level: give it its subpackage"
    assert all((ROOT / "flows" / sub / "__init__.py").read_text().startswith('"""') for sub in FLOWS)


def test_no_flows_import_crosses_its_parts_rule():
    wrong = sorted(f"{m} -> {o}" for m, out in graph().items() if flows_part(m) is not None for o in out
                   if flows_part(o) is not None and flows_part(o) != flows_part(m)
                   and flows_part(o) not in FLOWS_MAY[flows_part(m)])
    assert wrong == []


def module_level_imports(path: Path) -> set[str]:
    """The top-level packages a file imports when it is imported: imports inside functions left out."""
    found: set[str] = set()

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
            elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit([n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt)])

    visit(ast.parse(path.read_text(), str(path)).body)
    return found


def test_the_stage_table_and_runner_load_without_prefect():
    """`lmforge --help` and every stage command import flows.stages: Prefect (about a second) only where a flow runs.
    Its lower-layer imports are covered by the layer rule (no layer below flows imports Prefect either)."""
    paths = [ROOT / "flows" / "__init__.py", *(ROOT / "flows" / "stages").glob("*.py"),
             *(p for layer in LAYERS[:LAYERS.index("flows")] for p in (ROOT / layer).rglob("*.py"))]
    assert sorted(str(p.relative_to(ROOT)) for p in paths if "prefect" in module_level_imports(p)) == []


MAX_LINES = 500


def test_every_source_file_reads_whole():
    """The house plan keeps files small enough to read whole (../shared/STYLE.md: a few hundred lines)."""
    long = {name: n for name, path in project_modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}, f"split by responsibility: {long}"
