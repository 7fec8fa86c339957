"""A customer turn, in the order it runs.

- :mod:`.submit`: the one way in. ``message_receive`` (the widget's websocket, the customer
  API), ``ask_submit`` (``ask``, the batch command, ``evaluate_answers``) save the message and
  its turn and enqueue the stages on commit; ``turn_wait`` waits for the end.
- :mod:`.guard`: stage 1, the guardian's screening (DT-001).
- :mod:`.plan`: stage 2, schema-guided planning, routing (DT-002), the three outputs.
- :mod:`.answer`: stage 3, the plan's searches, the agent's streamed and cited answer
  (:mod:`.answer.stage`, with its helpers beside it).
- :mod:`.runner`: the Celery tasks that run one stage each, under a lease, within the turn's
  time budget; :mod:`.recovery`: the sweeper that sends a stranded stage again.
- :mod:`.turnlog`, :mod:`.leases`: what the stages and the runner share (the stage log, a
  stage ending its turn; the turn's lease and time budget).

Imports point down this list's dependency order and never in a circle
(``tests/test_architecture.py`` checks it); ``supportdesk.services`` knows none of it.
This module imports nothing, so importing one stage does not load the others.
"""
