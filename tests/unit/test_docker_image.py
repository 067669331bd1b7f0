"""infra/docker: the image for Beam workers and training, and its CUDA variant for GPU nodes (Dockerfile.cuda). No Docker engine runs here, so the image is not
built: these tests read the Dockerfile (every COPY source exists and is not excluded from the build context, the
torch and Beam pins match constraints.txt, the demo's sample is inside the image) and run the entrypoint script
itself with stub programs in place of Beam's boot and `lmforge`."""
from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "infra" / "docker"
ENTRYPOINT = DOCKER / "entrypoint.sh"


def instructions(name: str = "Dockerfile") -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    text = re.sub(r"\\\n", " ", (DOCKER / name).read_text())
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def copies(name: str = "Dockerfile") -> list[tuple[list[str], list[str], str]]:
    """(flags, sources, destination) of each COPY."""
    rows = []
    for word, rest in instructions(name):
        if word == "COPY":
            parts = rest.split()
            flags = [p for p in parts if p.startswith("--")]
            paths = [p for p in parts if not p.startswith("--")]
            rows.append((flags, paths[:-1], paths[-1]))
    return rows


def pins() -> dict[str, str]:
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "constraints.txt").read_text(), re.M))


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.cuda"])
def test_every_copy_source_is_in_the_repository_and_the_build_context(name):
    ignored = [p.strip() for p in (DOCKER / f"{name}.dockerignore").read_text().splitlines()
               if p.strip() and not p.startswith("#")]
    stages = {rest.split()[-1] for word, rest in instructions(name) if word == "FROM" and " AS " in f" {rest.upper()} "}
    checked = 0
    for flags, sources, _ in copies(name):
        stage = next((f.split("=", 1)[1] for f in flags if f.startswith("--from=")), None)
        if stage:
            assert stage in stages, f"COPY --from={stage}: no build stage of that name ({stages})"
            continue
        for src in sources:
            assert (ROOT / src).exists(), f"COPY {src}: not in the repository"
            assert not any(fnmatch.fnmatch(src, pat) or src.startswith(pat.rstrip("/") + "/") for pat in ignored), \
                f"COPY {src}: excluded by Dockerfile.dockerignore"
            checked += 1
    assert checked >= 10


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.cuda"])
def test_the_image_has_every_package_the_install_ships(name):
    """pyproject's package list and the COPY lines must agree, or `pip install .` in the image misses a package
    (common/ moved below pipelines/ and training/ on 2026-11-25)."""
    include = re.search(r"^include = \[(.*)\]", (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    packages = {p.strip().strip('"').rstrip("*") for p in include.split(",")}
    copied = {src for _, sources, _ in copies(name) for src in sources}
    assert packages and packages <= copied, f"{name} lacks COPY for {sorted(packages - copied)}"


def test_pins_match_constraints_and_the_demo_has_its_inputs():
    text = (DOCKER / "Dockerfile").read_text()
    c = pins()
    assert f"torch=={c['torch']}" in text and f"startswith('{c['torch']}')" in text
    assert f"ARG BEAM_VERSION={c['apache-beam']}" in text  # boot must match the SDK the workers run
    assert "pip install --no-cache-dir -c constraints.txt '.[s3,gcp]'" in text  # with the object-store file systems
    copied = {src for _, sources, _ in copies() for src in sources}
    from flows.params import DagParams
    from pipelines.labeled.vader import DEFAULT_SOURCE

    # what `lmforge run` (make demo) reads, relative to the image's working directory
    for needed in [*DagParams().crawl, DEFAULT_SOURCE]:
        assert any(needed == s or needed.startswith(s.rstrip("/") + "/") for s in copied), needed
    workdir = next(rest for word, rest in instructions() if word == "WORKDIR")
    env = " ".join(rest for word, rest in instructions() if word == "ENV")
    assert f"LMFORGE_HOME={workdir}" in env and "TORCH_EXTENSIONS_DIR=" in env
    (_, _, dest), = [(f, s, d) for f, s, d in copies() if s == ["infra/docker/entrypoint.sh"]]
    assert next(rest for word, rest in instructions() if word == "ENTRYPOINT") == f'["{dest}"]'


@pytest.fixture
def run_entrypoint(tmp_path):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name in ("boot", "lmforge", "sometool"):
        (stubs / name).write_text(f'#!/bin/sh\necho "{name}" "$@"\n')
        (stubs / name).chmod(0o755)

    def run(*args: str, **env: str) -> subprocess.CompletedProcess:
        e = {"PATH": f"{stubs}{os.pathsep}/usr/bin:/bin", "BEAM_BOOT": str(stubs / "boot"),
             "LMFORGE_BIN": str(stubs / "lmforge"), **env}
        return subprocess.run([str(ENTRYPOINT), *args], env=e, capture_output=True, text=True, timeout=30)
    return run


def test_entrypoint_picks_the_role(run_entrypoint):
    assert os.access(ENTRYPOINT, os.X_OK), "infra/docker/entrypoint.sh must be executable"

    def said(*args, **env):
        proc = run_entrypoint(*args, **env)
        return proc.returncode, proc.stdout.strip(), proc.stderr.strip()

    # a Beam runner's SDK harness command lines (docker environment; Flink/Spark worker pool)
    harness = ["--id=1-1", "--logging_endpoint=localhost:1", "--artifact_endpoint=localhost:2",
               "--provision_endpoint=localhost:3", "--control_endpoint=localhost:4"]
    assert said(*harness) == (0, "boot " + " ".join(harness), "")
    assert said("--worker_pool") == (0, "boot --worker_pool", "")
    # lmforge's own command lines, including flags that merely look like Beam's
    assert said("pretrain", "--nnodes", "2", "--id=7") == (0, "lmforge pretrain --nnodes 2 --id=7", "")
    assert said("--help") == (0, "lmforge --help", "")
    assert said() == (0, "lmforge", "")
    # a program on PATH runs as itself (bash, python, prefect ...)
    assert said("sometool", "x") == (0, "sometool x", "")
    # forced roles, and a wrong one
    assert said("corpus", LMFORGE_ROLE="beam") == (0, "boot corpus", "")
    assert said("sometool", LMFORGE_ROLE="lmforge") == (0, "lmforge sometool", "")
    code, _, err = said("x", LMFORGE_ROLE="spark")
    assert code == 2 and "LMFORGE_ROLE must be beam, lmforge or auto, got 'spark'" in err


def test_cuda_image_installs_the_cuda_wheel_without_a_compiler_and_runs_the_doctor():
    """Dockerfile.cuda: an official nvidia/cuda base with Python 3.11 from the distribution, torch at the pin from
    a CUDA wheel index (and asserted to be a CUDA build), DeepSpeed at its pin with no op prebuilt, nothing that
    compiles (no build-essential, no nvcc from a devel image), and `lmforge doctor` as the build's check and the
    image's default command."""
    name = "Dockerfile.cuda"
    text = (DOCKER / name).read_text()
    steps = instructions(name)
    args = dict(rest.split("=", 1) for word, rest in steps if word == "ARG" and "=" in rest)
    assert re.fullmatch(r"nvidia/cuda:12\.\d+\.\d+-(base|runtime)-ubuntu22\.04", args["CUDA_IMAGE"]), args
    assert [rest for word, rest in steps if word == "FROM"] == ["${CUDA_IMAGE}"]
    assert re.fullmatch(r"https://download\.pytorch\.org/whl/cu12[68]", args["TORCH_INDEX"])
    run = " && ".join(rest for word, rest in steps if word == "RUN")
    c = pins()
    assert f"pip install --no-cache-dir torch=={c['torch']} --index-url ${{TORCH_INDEX}}" in run
    assert f"startswith('{c['torch']}')" in run and "assert torch.version.cuda" in run
    assert "DS_BUILD_OPS=0 DS_ACCELERATOR=cpu pip install --no-cache-dir -c constraints.txt deepspeed" in run
    assert "deepspeed" in c  # the pin the constraint applies
    assert "python3.11 python3.11-venv" in run and "python3.11 -m venv /opt/venv" in run
    for compiler in ("build-essential", "gcc", "g++", "nvcc", "cuda-toolkit", "-devel"):
        assert compiler not in run and compiler not in args["CUDA_IMAGE"], compiler
    assert "lmforge doctor --no-gpu-run" in run
    assert next(rest for word, rest in steps if word == "CMD") == '["doctor"]'
    (_, _, dest), = [(f, s, d) for f, s, d in copies(name) if s == ["infra/docker/entrypoint.sh"]]
    assert next(rest for word, rest in steps if word == "ENTRYPOINT") == f'["{dest}"]'
    env = " ".join(rest for word, rest in steps if word == "ENV")
    workdir = next(rest for word, rest in steps if word == "WORKDIR")
    assert f"LMFORGE_HOME={workdir}" in env and "LMFORGE_ROLE=lmforge" in env and "PATH=/opt/venv/bin:$PATH" in env
    assert "DS_ACCELERATOR" not in env  # picked per node at run time
    # the doctor's pretraining check reads the bundled vaderSentiment sample from the working directory
    copied = {src for _, sources, _ in copies(name) for src in sources}
    assert "samples/labeled" in copied and "samples/licenses" in copied
    assert "docker build` fails" in text and "NOT BUILT" in text


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.cuda"])
def test_the_image_runs_as_the_pods_non_root_user_who_can_write_where_lmforge_writes(name):
    """USER is the numeric UID and GID the cluster manifests run the pods as (Kubernetes checks runAsNonRoot against
    a numeric USER only), created with that HOME; the user owns the working directory's runs/ (`lmforge run`, the
    doctor's report) and TORCH_EXTENSIONS_DIR, and nothing runs as root after USER."""
    from training.launch.cluster import POD_UID

    steps = instructions(name)
    users = [i for i, (word, _) in enumerate(steps) if word == "USER"]
    assert users and steps[users[-1]][1] == f"{POD_UID}:{POD_UID}", [steps[i] for i in users]
    run = " && ".join(rest for word, rest in steps if word == "RUN")
    assert f"groupadd --gid {POD_UID} lmforge" in run
    home = re.search(rf"useradd --uid {POD_UID} --gid {POD_UID} .*--home-dir (\S+)", run).group(1)
    env = dict(kv.split("=", 1) for word, rest in steps if word == "ENV" for kv in rest.split())
    workdir = next(rest for word, rest in steps if word == "WORKDIR")
    assert env["HOME"] == home
    owned = re.search(rf"chown {POD_UID}:{POD_UID} ([^&]+)", run).group(1).split()
    assert {"runs", ".torch_extensions"} <= set(owned)
    assert env["TORCH_EXTENSIONS_DIR"] == f"{workdir}/.torch_extensions"
    if name == "Dockerfile":  # the flows' runs, the refresh's band index and crawl snapshots: relative paths
        from flows.params import DagParams, RefreshParams

        refresh = RefreshParams()
        assert {DagParams().runs_dir, refresh.dedup_index.split("/")[0], refresh.crawl_root} <= set(owned)
