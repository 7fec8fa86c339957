"""The turn's Celery tasks, where the worker looks for them.

Celery's ``autodiscover_tasks`` imports ``<app>.tasks`` of every installed app; the
tasks themselves live with the pipeline (:mod:`supportdesk.pipeline.runner`).
"""

from supportdesk.pipeline.runner import answer_task, guard_task, sgr_task, turn_pipeline

__all__ = ["answer_task", "guard_task", "sgr_task", "turn_pipeline"]
