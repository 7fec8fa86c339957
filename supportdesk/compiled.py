"""Hot reads whose SQL Django compiles once per process.

A stage worker runs a few small ORM reads for every stage of every turn (the turn with its
conversation and message, the row lock, "is a person on this conversation?"). Django builds the
SQL of a queryset anew at each evaluation; for the turn's joined read that was ~8 % of a stage
worker's CPU under a burst (``docs/benchmarks.md``, issue 31), more than running the statement.
A :class:`CompiledRead` is the same queryset, compiled once with a stand-in for its one
parameter; each call binds the parameter, runs the statement and builds the rows as the
queryset would (the field converters, ``select_related`` objects included).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators
from django.db.transaction import TransactionManagementError

M = TypeVar("M", bound=Model)

# Stands in for the parameter while the SQL is compiled (never executed): inside the range of every
# integer column, positive ones included (Django compiles a condition out of range to nothing).
_STAND_IN = 2_017_346_029


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple[Any, ...]
    at: tuple[int, ...]  # the parameter's places in ``params``
    converters: list[tuple[int, tuple[list[Callable[..., Any]], Any]]]
    for_update: bool
    model: type[Model] | None  # None: rows as tuples (``values_list``)
    fields: slice
    init_list: list[str]
    related: list[Any]


class CompiledRead(Generic[M]):
    """``build(parameter)`` -> the queryset (a model or ``values_list`` query on the default database),
    compiled at the first call. The parameter must reach the SQL unchanged (an id; a subquery may take
    it again, e.g. to compare with a column of the row it names)."""

    def __init__(self, build: Callable[[Any], QuerySet[M, Any]]) -> None:
        self._build = build
        self._compiled: _Compiled | None = None
        self._lock = threading.Lock()

    def rows(self, parameter: Any) -> Iterator[Any]:
        """The queryset's results for ``parameter`` (model instances, or tuples for ``values_list``)."""
        compiled = self._compiled or self._compile()
        connection = connections[DEFAULT_DB_ALIAS]
        if compiled.for_update and connection.get_autocommit():
            raise TransactionManagementError("select_for_update cannot be used outside of a transaction.")
        params = list(compiled.params)
        for place in compiled.at:
            params[place] = parameter
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            fetched = cursor.fetchall()
        for values in fetched:
            row = list(values)
            for position, (functions, expression) in compiled.converters:
                value = row[position]
                for function in functions:
                    value = function(value, expression, connection)
                row[position] = value
            if compiled.model is None:
                yield tuple(row)
                continue
            instance = compiled.model.from_db(DEFAULT_DB_ALIAS, compiled.init_list, row[compiled.fields])
            for populator in compiled.related:
                populator.populate(row, instance)
            yield instance

    def first(self, parameter: Any) -> Any:
        """The first result for ``parameter``, or None."""
        return next(self.rows(parameter), None)

    def _compile(self) -> _Compiled:
        with self._lock:
            if self._compiled is not None:
                return self._compiled
            queryset = self._build(_STAND_IN)
            compiler = queryset.query.get_compiler(using=DEFAULT_DB_ALIAS)
            sql, params = compiler.as_sql()
            places = [i for i, value in enumerate(params) if value == _STAND_IN]
            if not places:
                raise ValueError(f"the parameter does not reach the SQL: {sql}")
            columns = [column[0] for column in compiler.select[: compiler.col_count]]
            converters = list(compiler.get_converters(columns).items())
            klass_info = compiler.klass_info
            model = None if klass_info is None or compiler.query.values_select else klass_info["model"]
            fields, init_list, related = slice(0), [], []
            if model is not None:
                assert klass_info is not None
                first, last = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
                fields = slice(first, last)
                init_list = [column[0].target.attname for column in compiler.select[first:last]]
                # The stubs follow a later Django, whose populators take a fetch mode too.
                related = get_related_populators(klass_info, compiler.select, DEFAULT_DB_ALIAS)  # type: ignore[call-arg]
            self._compiled = _Compiled(sql=sql, params=tuple(params), at=tuple(places), converters=converters,
                                       for_update=compiler.query.select_for_update, model=model, fields=fields,
                                       init_list=init_list, related=related)
            return self._compiled
