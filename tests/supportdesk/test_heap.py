"""Server processes freeze what they loaded at start (config.heap): the collector's full scans skip it."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref

from celery import signals

from config.celery import worker_objects_freeze
from config.heap import startup_objects_freeze
from tests.conftest import ROOT


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_start_up_garbage_is_collected_and_the_rest_frozen():
    cycle = _Node()
    gone = weakref.ref(cycle)
    del cycle
    try:
        frozen = startup_objects_freeze()
        assert gone() is None  # collected first, not frozen with the rest
        assert frozen > 10_000  # this process's modules, at least (some leave it as they are freed)
        later = _Node()
        later_gone = weakref.ref(later)
        del later
        gc.collect()
        assert later_gone() is None  # a turn's own cyclic garbage is still collected
    finally:
        gc.unfreeze()


def test_a_worker_freezes_where_its_tasks_run_threads_pool_or_prefork_child():
    for signal in (signals.worker_ready, signals.worker_process_init):
        assert any(receiver() is worker_objects_freeze for _, receiver in signal.receivers)
    try:
        worker_objects_freeze()
        assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()


def test_the_web_process_freezes_once_the_asgi_application_is_built():
    code = "import gc, config.asgi; print(gc.get_freeze_count(), len(gc.get_objects()))"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    frozen, scanned = map(int, done.stdout.split())
    assert frozen > 50_000 and scanned < frozen / 10  # the full collection walks a small fraction of the heap
