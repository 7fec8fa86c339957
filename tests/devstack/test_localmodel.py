"""The bundled local model: parts assembled in order and checked by sha256; its bring-up state in Redis."""

from __future__ import annotations

import hashlib
import time
import tomllib
from pathlib import Path

import pytest
import redis
from django.conf import settings

from devstack.localmodel import MODELS, ChecksumMismatch, LocalModel, local_model_get, model_assemble
from devstack.modelup import ModelBringUp, ServerArgv
from devstack.processes import ProcessGroup, StackError

ROOT = Path(__file__).resolve().parents[2]


def _parts(tmp_path: Path, *contents: bytes) -> list[Path]:
    paths = []
    for number, content in enumerate(contents, start=1):
        path = tmp_path / f"part{number:02d}.bin"
        path.write_bytes(content)
        paths.append(path)
    return paths


def test_good_parts_are_assembled_in_order_and_checked(tmp_path):
    parts = _parts(tmp_path, b"GGUF" + b"a" * 1000, b"b" * 3000, b"c" * 10)
    whole = b"".join(p.read_bytes() for p in parts)
    seen: list[tuple[int, int]] = []
    target = model_assemble(parts=parts, sha256=hashlib.sha256(whole).hexdigest(), target=tmp_path / "m" / "x.gguf",
                            progress=lambda done, total: seen.append((done, total)))
    assert target.read_bytes() == whole
    assert seen[-1] == (len(whole), len(whole))
    assert (tmp_path / "m" / "x.gguf.sha256").read_text().startswith(hashlib.sha256(whole).hexdigest())
    # Once checked, a later start does not assemble again.
    seen.clear()
    model_assemble(parts=parts, sha256=hashlib.sha256(whole).hexdigest(), target=target,
                   progress=lambda done, total: seen.append((done, total)))
    assert seen == []


def test_a_corrupted_part_is_a_clear_error_and_leaves_no_file(tmp_path):
    good = [b"GGUF" + b"a" * 1000, b"b" * 3000]
    expected = hashlib.sha256(b"".join(good)).hexdigest()
    parts = _parts(tmp_path, good[0], b"b" * 2999 + b"X")
    target = tmp_path / "m" / "x.gguf"
    with pytest.raises(ChecksumMismatch) as failure:
        model_assemble(parts=parts, sha256=expected, target=target)
    message = str(failure.value)
    assert expected in message and hashlib.sha256(good[0] + b"b" * 2999 + b"X").hexdigest() in message
    assert not target.exists() and not list(target.parent.glob("*.partial"))


def test_parts_in_the_wrong_order_do_not_pass(tmp_path):
    first, second = b"GGUF" + b"a" * 100, b"b" * 100
    parts = _parts(tmp_path, second, first)
    with pytest.raises(ChecksumMismatch):
        model_assemble(parts=parts, sha256=hashlib.sha256(first + second).hexdigest(), target=tmp_path / "x.gguf")


def test_an_assembled_file_changed_later_is_assembled_and_checked_again(tmp_path):
    parts = _parts(tmp_path, b"GGUF" + b"a" * 100, b"b" * 100)
    whole = b"".join(p.read_bytes() for p in parts)
    digest = hashlib.sha256(whole).hexdigest()
    target = model_assemble(parts=parts, sha256=digest, target=tmp_path / "x.gguf")
    target.write_bytes(b"damaged")
    assert model_assemble(parts=parts, sha256=digest, target=target).read_bytes() == whole


def test_every_bundled_model_is_pinned_in_its_extra_and_has_a_recorded_digest():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    lock = (ROOT / "uv.lock").read_text()
    for model in MODELS.values():
        assert len(model.sha256) == 64 and int(model.sha256, 16) >= 0
        pinned = [requirement.split("==") for requirement in extras[model.extra]]
        assert [name.replace("-", "_") for name, _ in pinned] == list(model.packages)  # the assembly order
        for name, version in pinned:
            assert f'name = "{name}"\nversion = "{version}"' in lock
    assert local_model_get("").name == "qwen2.5-coder-1.5b"
    with pytest.raises(StackError, match="qwen2.5-coder-0.5b"):
        local_model_get("gpt-5")


def test_the_bring_up_says_starting_and_a_missing_package_stops_it_clearly(tmp_path):
    from supportdesk.modelstate import model_state

    missing = LocalModel(name="absent", title="Absent", alias="absent", extra="model-absent",
                         packages=("no_such_model_part1",), pattern="data/*.bin", sha256="0" * 64)
    argv = ServerArgv(engine="prebuilt", port=1, alias="absent", threads=1, ctx=512, parallel=1)
    bringup = ModelBringUp(model=missing, models_dir=tmp_path, redis_url=settings.REDIS_URL, port=1, argv_for=argv,
                           env={}, started=time.time())
    group = ProcessGroup(log_dir=tmp_path / "logs")
    try:
        bringup.begin()
        assert model_state().starting is True
        deadline = time.monotonic() + 30
        with pytest.raises(StackError, match="no_such_model_part1 is not installed.*model-absent"):
            while time.monotonic() < deadline:
                bringup.poll(group)
                time.sleep(0.05)
    finally:
        bringup.stop()
        group.stop_all()
    assert model_state().starting is False
    assert redis.Redis.from_url(settings.REDIS_URL).exists("supportdesk:model:state") == 0
