"""Hot reads whose SQL Django compiles once per process.

A stage worker runs a few small ORM reads for every stage of every turn (the turn with its
conversation and message, the row lock, "is a person on this conversation?"). Django builds the
SQL of a queryset anew at each evaluation; for the turn's joined read that was ~8 % of a stage
worker's CPU under a burst (``docs/benchmarks.md``, issue 31), more than running the statement.
A :class:`CompiledRead` is the same queryset, compiled once with stand-ins for its
parameters; each call binds them, runs the statement and builds the rows as the
queryset would (the field converters, ``select_related`` objects included).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators
from django.db.transaction import TransactionManagementError

M = TypeVar("M", bound=Model)

# Stand for the parameters while the SQL is compiled (never executed; the first, the next one up, ...):
# inside the range of every integer column, positive ones included (Django compiles a condition out
# of range to nothing).
_STAND_IN = 2_017_346_029


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple[Any, ...]
    at: tuple[tuple[int, int], ...]  # (place in ``params``, which parameter)
    converters: list[tuple[int, tuple[list[Callable[..., Any]], Any]]]
    for_update: bool
    model: type[Model] | None  # None: rows as tuples (``values_list``)
    fields: slice
    init_list: list[str]
    related: list[Any]


class CompiledRead(Generic[M]):
    """``build(*parameters)`` -> the queryset (a model or ``values_list`` query on the default database),
    compiled at the first call. Each of the ``parameters`` integers must reach the SQL unchanged (an id,
    a sequence number; a subquery may take one again, e.g. to compare with a column of the row it names)."""

    def __init__(self, build: Callable[..., QuerySet[M, Any]], *, parameters: int = 1) -> None:
        self._build = build
        self._parameters = parameters
        self._compiled: _Compiled | None = None
        self._lock = threading.Lock()

    def rows(self, *parameters: Any) -> Iterator[Any]:
        """The queryset's results for ``parameters`` (model instances, or tuples for ``values_list``)."""
        compiled = self._compiled or self._compile()
        return self._built(compiled, self._fetched(compiled, compiled.sql, self._bound(compiled, parameters)))

    def first_after(self, statement: str, statement_params: Sequence[Any], *parameters: Any) -> tuple[Any, bool]:
        """``statement`` (an UPDATE, INSERT or DELETE) and the read (of model instances), in one statement:
        the first result for ``parameters`` as it was before ``statement`` (or None), and whether
        ``statement`` changed a row (False, too, when the read finds nothing)."""
        compiled = self._compiled or self._compile()
        columns, tables = compiled.sql.split(" FROM ", 1)
        sql = f"WITH changed AS ({statement} RETURNING 1) {columns}, EXISTS (SELECT 1 FROM changed) FROM {tables}"
        fetched = self._fetched(compiled, sql, [*statement_params, *self._bound(compiled, parameters)])
        first = next(self._built(compiled, fetched), None)
        return first, bool(fetched and fetched[0][-1])  # the flag: the column after the queryset's own

    def _bound(self, compiled: _Compiled, parameters: tuple[Any, ...]) -> list[Any]:
        if len(parameters) != self._parameters:
            raise TypeError(f"{self._parameters} parameters expected, not {len(parameters)}")
        params = list(compiled.params)
        for place, which in compiled.at:
            params[place] = parameters[which]
        return params

    @staticmethod
    def _fetched(compiled: _Compiled, sql: str, params: list[Any]) -> list[Any]:
        connection = connections[DEFAULT_DB_ALIAS]
        if compiled.for_update and connection.get_autocommit():
            raise TransactionManagementError("select_for_update cannot be used outside of a transaction.")
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()

    @staticmethod
    def _built(compiled: _Compiled, fetched: list[Any]) -> Iterator[Any]:
        connection = connections[DEFAULT_DB_ALIAS]
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

    def first(self, *parameters: Any) -> Any:
        """The first result for ``parameters``, or None."""
        return next(self.rows(*parameters), None)

    def _compile(self) -> _Compiled:
        with self._lock:
            if self._compiled is not None:
                return self._compiled
            stand_ins = [_STAND_IN + which for which in range(self._parameters)]
            queryset = self._build(*stand_ins)
            compiler = queryset.query.get_compiler(using=DEFAULT_DB_ALIAS)
            sql, params = compiler.as_sql()
            places = [(i, stand_ins.index(value)) for i, value in enumerate(params) if value in stand_ins]
            if {which for _, which in places} != set(range(self._parameters)):
                raise ValueError(f"a parameter does not reach the SQL: {sql}")
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
