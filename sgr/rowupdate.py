"""One UPDATE of a model instance's fields, its SQL built once per model and set of fields.

``instance.save(update_fields=...)`` compiles the same UPDATE for every call; on the stages' hot path
(a turn's status, an answer's figures on its plan record) that compiling cost more than the statement
(issue 31). Here the SQL is built the first time a model and a set of fields meet and kept per process;
each call only prepares the values, as ``save`` would (``pre_save``: ``auto_now`` fields included). No save
signals are sent, so it is for models that have none. A public module of ``sgr``: the conversation domain
(``supportdesk.services``) saves its turns with it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import DatabaseError, connection
from django.db.models import Field, Model

_BUILT: dict[tuple[type[Model], tuple[str, ...]], tuple[str, list[Field[Any, Any]]]] = {}


def fields_update_sql(instance: Model, fields: Sequence[str]) -> tuple[str, list[Any]]:
    """The UPDATE of ``fields`` of ``instance``'s row (by id) and its parameters, the id last."""
    model = type(instance)
    names = tuple(dict.fromkeys(fields))
    built = _BUILT.get((model, names))
    if built is None:
        columns = [field for field in map(model._meta.get_field, names) if isinstance(field, Field)]
        if len(columns) != len(names):
            raise ValueError(f"not columns of {model.__name__}: {names}")
        quote = connection.ops.quote_name
        assignments = ", ".join(f"{quote(str(field.column))} = %s" for field in columns)
        built = _BUILT.setdefault((model, names),
                                  (f"UPDATE {quote(model._meta.db_table)} SET {assignments} WHERE id = %s", columns))
    sql, columns = built
    return sql, [*(field.get_db_prep_save(field.pre_save(instance, False), connection) for field in columns),
                 instance.pk]


def fields_update(instance: Model, fields: Sequence[str]) -> None:
    """``instance.save(update_fields=fields)`` as one prepared UPDATE; :class:`DatabaseError` when the row is gone."""
    sql, params = fields_update_sql(instance, fields)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if cursor.rowcount != 1:
            raise DatabaseError(f"{type(instance).__name__} {instance.pk} is gone: "
                                f"its fields {', '.join(fields)} were not saved")
