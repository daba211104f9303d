"""Spark SQL scalar expressions (sqlglot nodes) to typed plan expressions.

Every operator and function call goes through
:func:`ddflow.plan.functions.typed`, so the type rules and the kernels
are one table; this module only reads sqlglot's node shapes: which
class is which function, where its arguments sit, and the literal forms
(Spark's typing of ``0.06`` as DECIMAL(2,2), ``date '...'``,
``INTERVAL '90' DAY``).  Constant subexpressions over literals (a date
literal minus an interval) are folded here, once, at plan time.

>>> from ddflow.base.schema import Schema
>>> from ddflow.sql.planner import plan_sql
>>> rel = plan_sql("SELECT x + 0.06 AS y FROM t", {"t": Schema.of({"x": "decimal(15,2)"})})
>>> rel.schema.types
('decimal(16,2)',)
"""
from __future__ import annotations

import decimal
import re

import numpy as np
from sqlglot import exp

from ddflow.base.schema import decimal_type, sql_type
from ddflow.errors import SchemaError
from ddflow.plan import functions as F
from ddflow.plan.expr import Call, Col, Expr, Held, Lit, evaluate
from ddflow.sql.dialect import PercentileDisc, TryAvg, TrySum
from ddflow.sql.library import library_call
from ddflow.sql.nesting import chain_parts, list_of

_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}
_CMP = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
AGGREGATES = {exp.Sum: "sum", exp.Min: "min", exp.Max: "max", exp.Avg: "avg", exp.Count: "count",
              exp.Stddev: "stddev_samp", exp.StddevSamp: "stddev_samp", exp.StddevPop: "stddev_pop",
              exp.Variance: "var_samp", exp.VariancePop: "var_pop", exp.Median: "percentile",
              exp.Quantile: "percentile", exp.CovarPop: "covar_pop", exp.CovarSamp: "covar_samp", exp.Corr: "corr",
              exp.ArgMax: "max_by", exp.ArgMin: "min_by", TrySum: "try_sum", TryAvg: "try_avg",
              exp.Skewness: "skewness", exp.Kurtosis: "kurtosis",
              exp.RegrSxx: "regr_sxx", exp.RegrSyy: "regr_syy", exp.RegrSxy: "regr_sxy", exp.RegrSlope: "regr_slope",
              exp.RegrIntercept: "regr_intercept", exp.RegrR2: "regr_r2", exp.Mode: "mode", exp.GroupConcat: "listagg",
              PercentileDisc: "percentile_disc",
              exp.BitwiseAndAgg: "bit_and", exp.BitwiseOrAgg: "bit_or", exp.BitwiseXorAgg: "bit_xor",
              # Spark's answer depends on the rows' order, which a view's must not: ddflow gives the least
              # non-NULL value (one of the answers Spark may give; NULL only where every value is NULL).
              exp.AnyValue: "min", exp.First: "min", exp.Last: "min",
              # Exact, so within any error bound Spark states: COUNT(DISTINCT x), and the nearest-rank value.
              exp.ApproxDistinct: "count", exp.ApproxQuantile: "percentile_approx"}
#: sqlglot node classes that are one-argument functions of the table, by name.
_UNARY = {exp.Lower: "lower", exp.Upper: "upper", exp.Length: "length", exp.Quarter: "quarter",
          exp.Hour: "hour", exp.Minute: "minute", exp.Second: "second", exp.Year: "year", exp.Month: "month",
          exp.Day: "day", exp.DayOfMonth: "day", exp.DayOfWeek: "dayofweek", exp.DayOfYear: "dayofyear",
          exp.WeekOfYear: "week", exp.Dayname: "dayname", exp.Monthname: "monthname"}
_BINARY_FN = {exp.StartsWith: "starts_with", exp.EndsWith: "ends_with", exp.Contains: "contains",
              exp.AddMonths: "add_months"}
#: EXTRACT's (and date_part's) fields as Spark names them (DatePart.parseExtractField), and the function of each.
_EXTRACT = {**dict.fromkeys(("year", "y", "years", "yr", "yrs"), "year"), **dict.fromkeys(("quarter", "qtr"), "quarter"),
            **dict.fromkeys(("month", "mon", "mons", "months"), "month"), **dict.fromkeys(("week", "w", "weeks"), "week"),
            **dict.fromkeys(("day", "d", "days"), "day"), **dict.fromkeys(("dayofweek", "dow"), "dayofweek"),
            **dict.fromkeys(("dayofweek_iso", "dow_iso"), "dayofweek_iso"), "doy": "dayofyear",
            **dict.fromkeys(("hour", "h", "hours", "hr", "hrs"), "hour"),
            **dict.fromkeys(("minute", "m", "min", "mins", "minutes"), "minute"),
            **dict.fromkeys(("second", "s", "sec", "seconds", "secs"), "second_of_minute")}


#: What a construct is called in a refusal, for sqlglot classes that are not a function the user named.
_CONSTRUCTS = {exp.Dot: "a struct field access (`.`)", exp.Bracket: "a subscript (`[...]`)",
               exp.Array: "an ARRAY value", exp.Struct: "a STRUCT value", exp.Map: "a MAP value",
               exp.Lambda: "a lambda function (`->`)", exp.Window: "a window function here",
               exp.Lateral: "LATERAL", exp.Unnest: "UNNEST", exp.Pivot: "PIVOT", exp.Tuple: "a tuple of values here",
               exp.Values: "VALUES here", exp.Select: "a query here", exp.Star: "* here",
               exp.Any: "ANY (subquery)", exp.All: "ALL (subquery)", exp.Rollup: "GROUP BY ROLLUP",
               exp.Cube: "GROUP BY CUBE", exp.GroupingSets: "GROUPING SETS", exp.VarMap: "a MAP value",
               exp.Subquery: "a subquery here", exp.Exists: "EXISTS here", exp.Interval: "this INTERVAL",
               exp.Cast: "this CAST", exp.Case: "this CASE", exp.Placeholder: "a parameter placeholder",
               exp.Parameter: "a parameter"}
_ARRAY_FUNCTIONS = ("explode", "explode_outer", "posexplode", "posexplode_outer", "inline", "inline_outer")


def construct(node: exp.Expression) -> str:
    """The user's name for ``node``'s construct: a function by the name written, else a phrase, never a class name.

    >>> from sqlglot import parse_one
    >>> construct(parse_one("date_format(d, 'y')", read="spark")), construct(parse_one("a[0]", read="spark"))
    ('the function date_format()', 'a subscript (`[...]`)')
    """
    for cls, phrase in _CONSTRUCTS.items():
        if isinstance(node, cls):
            return phrase
    if isinstance(node, exp.Func):
        text = node.sql(dialect="spark")
        name = text.split("(", 1)[0].strip().lower() if "(" in text else (node.sql_name() or "").lower()
        if name in _ARRAY_FUNCTIONS:
            return f"{name} needs ARRAY columns"
        return f"the function {name}()" if name.replace("_", "").isalnum() else "this function"
    if isinstance(node, exp.Binary):
        return f"the operator in `{_plain(node.sql(dialect='spark'))}`"
    return "this construct"


def _plain(text: str) -> str:
    """SQL text without the names the qualifier made up (``_0.x`` is ``x``, ``AS _col_1`` and ``AS _0`` go)."""
    text = re.sub(r"\b_\d+\.", "", text)
    return re.sub(r" AS _(?:col_)?\d+\b", "", text)


def unsupported(node: exp.Expression, what: str | None = None) -> SchemaError:
    """A refusal naming the construct, where it stands, and the text."""
    if what is None:
        what = construct(node)
    text = _plain(node.sql(dialect="spark"))
    if len(text) > 80:
        text = text[:77] + "..."
    where = ""
    meta = getattr(node, "meta", None) or {}
    if "line" in meta and "col" in meta:
        where = f" at line {meta['line']}, column {meta['col']}"
    else:
        for inner in node.walk():
            m = getattr(inner, "meta", None) or {}
            if "line" in m:
                where = f" near line {m['line']}, column {m['col']}"
                break
    verdict = ", not supported" if what.endswith("needs ARRAY columns") else " is not supported"
    return SchemaError(f"SQL: {what}{verdict}{where} (in `{text}`)")


def literal(node: exp.Literal) -> Lit:
    """A literal with Spark's type: 7 bigint, 0.06 DECIMAL(2,2), 1e3 double, 'x' string."""
    if node.is_string:
        return Lit(node.this, "string")
    text = node.this
    low = text.lower()
    if "e" in low or low in ("inf", "nan"):
        return Lit(float(text), "double")
    if low.endswith("bd"):
        text = text[:-2]
    if "." in text:
        d = decimal.Decimal(text)
        sign, digits, exponent = d.as_tuple()
        scale = max(0, -exponent)
        unscaled = int(d.scaleb(scale, decimal.Context(prec=len(digits) + 2)))
        precision = max(len(str(abs(unscaled))) if unscaled else 1, scale)
        if precision > 38:
            return Lit(float(text), "double")
        return Lit(unscaled, decimal_type(precision, scale))  # past 18 digits: exact inside an expression
    value = int(text.rstrip("lLsSyY"))
    if not -(1 << 63) <= value < (1 << 63):
        raise SchemaError(f"SQL: the literal {text} does not fit in bigint")
    return Lit(value, "bigint")


def fold(e: Expr) -> Expr:
    """``e`` evaluated once if it reads no column (a constant): one literal instead of a per-row computation."""
    if isinstance(e, Call) and not e.columns() and e.type not in ("null",) and not isinstance(e, Lit):
        vals, null = evaluate(e, [(np.zeros(1, dtype=np.int64), np.zeros(1, dtype=bool))], stored=False)
        v = None if null[0] else vals[0]
        if isinstance(v, np.generic):
            v = v.item()
        return Lit(v, e.type)
    return e


class Expressions:
    """The planner's expression half: ``self.expr`` of a sqlglot node in a scope (mixed into the planner).

    ``replace`` maps a node's Spark SQL text to an expression already
    computed below (a group key, an aggregate, a subquery's column); it is
    consulted first.
    """

    def predicate(self, node: exp.Expression, scope, replace: dict | None = None) -> Expr:
        e = self.expr(node, scope, replace or {})
        if e.type not in ("boolean", "null"):
            raise SchemaError(f"SQL: a condition must be boolean, `{node.sql(dialect='spark')}` is {e.type}")
        return e

    def _bool(self, node: exp.Expression, scope, replace: dict | None) -> Expr:
        return self.predicate(node, scope, replace)

    def expr(self, node: exp.Expression, scope, replace: dict | None = None) -> Expr:
        replace = replace or {}
        if replace:
            hit = replace.get(node.sql(dialect="spark"))
            if hit is not None:
                return hit
        e = self._expr(node, scope, replace)
        return fold(e)

    def _call(self, name: str, args, node: exp.Expression) -> Expr:
        return F.typed(name, args, lambda: f" in `{_text(node)}`")  # the text only for an error

    def _chain(self, node: exp.Expression, scope, replace: dict) -> Expr | None:
        """A chain of AND, OR, ``||`` or arithmetic of one precedence (:data:`ddflow.sql.nesting.CHAINS`) as one
        node, its operands read in a loop: so 10,000 AND-ed conditions or a 1,000-term sum nest no deeper than
        two.  None for a chain of two operands of arithmetic (a plain binary call)."""
        stop = (lambda n: n.sql(dialect="spark") in replace) if replace else None
        logic = isinstance(node, (exp.And, exp.Or))
        operands, ops = chain_parts(node, through_parens=logic, stop=stop)
        if logic:
            return Call("and" if isinstance(node, exp.And) else "or",
                        tuple(self._bool(x, scope, replace) for x in operands), "boolean")
        if isinstance(node, exp.DPipe):
            return self._call("concat", tuple(_as_string(self.expr(x, scope, replace)) for x in operands), node)
        if len(operands) == 2:
            return None
        acc = self.expr(operands[0], scope, replace)
        steps: list[Call] = []
        for cls, x in zip(ops, operands[1:]):
            right = self.expr(x, scope, replace)
            call = self._call(_ARITH[cls], (Held(steps[-1].type) if steps else acc, right), node)
            if not steps and not call.columns():  # a constant start folds, as a nested constant would
                acc = fold(call)
                continue
            if not steps:
                acc = call.args[0]  # a string constant read as a date beside one
            steps.append(Call(call.op, (Held(call.args[0].type), call.args[1]), call.type))
        if not steps:
            return acc
        if len(steps) == 1:
            return Call(steps[0].op, (acc, steps[0].args[1]), steps[0].type)
        return Call("chain", (acc, *steps), steps[-1].type)

    def _expr(self, node: exp.Expression, scope, replace: dict) -> Expr:  # noqa: C901 - one case per node kind
        e = lambda x: self.expr(x, scope, replace)  # noqa: E731
        b = lambda x: self._bool(x, scope, replace)  # noqa: E731
        if isinstance(node, exp.Paren):
            return e(node.this)
        if isinstance(node, exp.Column):
            if replace and not scope.fields:  # after GROUP BY only group keys and aggregates are visible
                raise SchemaError(f"SQL: column `{node.sql(dialect='spark')}` must appear in GROUP BY or inside an "
                                  "aggregate")
            return scope.resolve(node)
        if isinstance(node, exp.Literal):
            return literal(node)
        if isinstance(node, exp.Null):
            return Lit(None, "null")
        if isinstance(node, exp.Boolean):
            return Lit(bool(node.this), "boolean")
        if isinstance(node, exp.Interval):
            return self._interval(node)
        called = library_call(self, node, e)  # lpad, regexp_replace, nvl2, <=>, try_add, pmod, log ...
        if called is not None:
            return called
        if type(node) in AGGREGATES:
            raise unsupported(node, "an aggregate here")
        if isinstance(node, (exp.And, exp.Or, exp.DPipe)) or type(node) in _ARITH:
            chained = self._chain(node, scope, replace)
            if chained is not None:
                return chained
        if type(node) in _ARITH:
            return self._call(_ARITH[type(node)], (e(node.left), e(node.right)), node)
        if isinstance(node, exp.SafeDivide):
            return self._call("try_divide", (e(node.this), e(node.expression)), node)
        if isinstance(node, exp.IntDiv):  # a DIV b: the quotient truncated toward zero, a bigint
            return self._call("div", (e(node.this), e(node.expression)), node)
        if type(node) in _CMP:
            return self._call(_CMP[type(node)], (e(node.left), e(node.right)), node)
        if isinstance(node, exp.Not):
            inner = node.this
            if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
                return Call("is_not_null", (e(inner.this),), "boolean")
            return Call("not", (b(inner),), "boolean")
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise unsupported(node, "IS other than IS [NOT] NULL")
            return Call("is_null", (e(node.this),), "boolean")
        if isinstance(node, exp.Neg):
            a = e(node.this)
            if isinstance(a, Lit) and a.value is not None and F.numeric(a.type):
                return Lit(-a.value, a.type)
            return self._call("neg", (a,), node)
        if isinstance(node, exp.Abs):
            return self._call("abs", (e(node.this),), node)
        if isinstance(node, exp.In):
            if node.args.get("query") is not None:
                raise unsupported(node, "IN (subquery) here")
            if node.args.get("unnest") is not None or node.args.get("field") is not None:
                raise unsupported(node, "this IN form")
            a = e(node.this)
            # Constants read directly: a generated list of 100,000 values is read in one pass, never rendered.
            items = [literal(x) if isinstance(x, exp.Literal) else Lit(None, "null") if isinstance(x, exp.Null)
                     else e(x) for x in list_of(node, getattr(self, "aside", None))]
            return F.in_list(a, items, lambda: f" in `{_text(node)}`")
        if isinstance(node, exp.Between):
            a, lo, hi = e(node.this), e(node.args["low"]), e(node.args["high"])
            ge, le = self._call(">=", (a, lo), node), self._call("<=", (a, hi), node)
            if isinstance(a, (Col, Lit)):
                return Call("and", (ge, le), "boolean")
            # ``a`` once (it is an expression): as two comparisons it would be evaluated twice per level of a
            # nested BETWEEN, 2**depth times in all.
            return Call("between", (a, _step(ge), _step(le)), "boolean")
        if isinstance(node, exp.Case):
            return self._case(node, scope, replace)
        if isinstance(node, exp.If):
            cond, yes = b(node.this), e(node.args["true"])
            no = e(node.args["false"]) if node.args.get("false") is not None else Lit(None, "null")
            return self._cased("case", [cond, yes, no], [1, 2], node)
        if isinstance(node, exp.Coalesce):
            args = [e(node.this)] + [e(x) for x in node.expressions]
            return self._cased("coalesce", args, list(range(len(args))), node)
        if isinstance(node, exp.Nullif):
            eq = self._call("=", (e(node.this), e(node.expression)), node)  # a string constant beside a date
            return self._call("nullif", eq.args, node)
        if isinstance(node, (exp.Greatest, exp.Least)):
            return self._extreme(node, [e(node.this)] + [e(x) for x in node.expressions])
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self._cast(node, e(node.this))
        if isinstance(node, exp.TsOrDsToDate):  # to_date(x), and sqlglot's wrapper around year(d) & co.
            a = e(node.this)
            if node.args.get("format") is not None:
                raise unsupported(node, "to_date with a format")
            return a if a.type == "date" else F.cast(a, "date", safe=bool(node.args.get("safe")))
        if isinstance(node, exp.ConcatWs):  # a Concat to sqlglot: the separator first, NULLs skipped
            if not node.expressions:
                raise SchemaError(f"SQL: `{node.sql(dialect='spark')}` needs a separator")
            return self._call("concat_ws", tuple(_as_string(e(x)) for x in node.expressions), node)
        if isinstance(node, (exp.Concat, exp.DPipe)):
            parts = node.expressions if isinstance(node, exp.Concat) else [node.this, node.expression]
            return self._call("concat", tuple(_as_string(e(x)) for x in parts), node)
        if type(node) in _UNARY:
            return self._call(_UNARY[type(node)], (e(node.this),), node)
        if type(node) in _BINARY_FN:
            return self._call(_BINARY_FN[type(node)], (e(node.this), e(node.expression)), node)
        if isinstance(node, exp.Extract):
            field = node.this.name.lower() if isinstance(node.this, (exp.Var, exp.Identifier)) else str(node.this).lower()
            if field not in _EXTRACT:
                raise unsupported(node, f"EXTRACT({field.upper()})")
            return self._call(_EXTRACT[field], (e(node.expression),), node)
        if isinstance(node, (exp.TimestampAdd, exp.TimestampDiff)) or (
                isinstance(node, exp.DateDiff) and node.args.get("unit") is not None):
            # timestampadd(unit, n, ts), timestampdiff(unit, start, end) and its synonym datediff(unit, start, end)
            unit = Lit(node.args["unit"].name.upper() if node.args.get("unit") is not None else "", "string")
            if isinstance(node, exp.TimestampAdd):
                return self._call("timestampadd", (unit, e(node.expression), e(node.this)), node)
            ends = [x.this if isinstance(x, exp.TsOrDsToDate) else x for x in (node.expression, node.this)]
            return self._call("timestampdiff", (unit, e(ends[0]), e(ends[1])), node)
        if isinstance(node, (exp.AtTimeZone, exp.FromTimeZone)):  # from_utc_timestamp, to_utc_timestamp
            name = "from_utc_timestamp" if isinstance(node, exp.AtTimeZone) else "to_utc_timestamp"
            return self._call(name, (e(node.this), e(node.args["zone"])), node)
        if isinstance(node, exp.ConvertTimezone):
            source = node.args.get("source_tz")
            return self._call("convert_timezone", (e(source) if source is not None else Lit("UTC", "string"),
                                                   e(node.args["target_tz"]), e(node.args["timestamp"])), node)
        if isinstance(node, exp.TsOrDsAdd):  # date_add / date_sub
            unit = (node.args.get("unit").name if node.args.get("unit") is not None else "DAY").lower()
            if unit != "day":
                raise unsupported(node, f"date_add in {unit}s")
            return self._call("date_add", (e(node.this), e(node.expression)), node)
        if isinstance(node, exp.DateDiff):
            return self._call("datediff", (e(node.this), e(node.expression)), node)
        if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):  # the unit as written (ddflow.sql.dialect)
            unit = node.args["unit"]
            unit = Lit(unit.name, "string") if isinstance(unit, exp.Var) else e(unit)
            if isinstance(node, exp.TimestampTrunc):
                return self._call("date_trunc", (unit, e(node.this)), node)
            return self._call("trunc", (e(node.this), unit), node)
        if isinstance(node, exp.Trim):
            pos = (node.args.get("position") or "").upper()
            if node.args.get("expression") is not None:  # TRIM([BOTH | LEADING | TRAILING] chars FROM s)
                name = {"LEADING": "trim_leading", "TRAILING": "trim_trailing"}.get(pos, "btrim")
                return self._call(name, (_as_string(e(node.this)), _as_string(e(node.expression))), node)
            return self._call({"LEADING": "ltrim", "TRAILING": "rtrim"}.get(pos, "trim"), (_as_string(e(node.this)),),
                              node)
        if isinstance(node, exp.Replace):
            rep = node.args.get("replacement")
            return self._call("replace", (e(node.this), e(node.expression), e(rep) if rep is not None
                                          else Lit("", "string")), node)
        if isinstance(node, exp.StrPosition):
            if node.args.get("position") is not None:
                raise unsupported(node, "position with a start")
            return self._call("position", (e(node.args["substr"]), e(node.this)), node)
        if isinstance(node, exp.Substring):
            args = [_as_string(e(node.this)), e(node.args["start"])]
            if node.args.get("length") is not None:
                args.append(e(node.args["length"]))
            return self._call("substring", tuple(args), node)
        if isinstance(node, exp.Escape):
            inner = node.this
            if not isinstance(inner, (exp.Like, exp.ILike)):
                raise unsupported(node, "ESCAPE here")
            return self._like(inner, scope, replace, escape=e(node.expression))
        if isinstance(node, (exp.Like, exp.ILike)):
            return self._like(node, scope, replace)
        if isinstance(node, exp.SplitPart) and node.args.get("delimiter") is not None \
                and node.args.get("part_index") is not None:
            return self._call("split_part", (e(node.this), e(node.args["delimiter"]), e(node.args["part_index"])), node)
        if isinstance(node, exp.RegexpLike):
            out = self._call("rlike", (_as_string(e(node.this)), e(node.expression)), node)
            return Call("not", (out,), "boolean") if node.args.get("negate") else out
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in ("now", "current_timestamp"):
            raise unsupported(node, "now() here (it may appear only in a WHERE or HAVING conjunct comparing a "
                                    "timestamp with now() plus or minus a constant: a temporal filter)")
        if isinstance(node, (exp.CurrentTimestamp, exp.CurrentDate)):
            name = "current_date()" if isinstance(node, exp.CurrentDate) else "current_timestamp()"
            raise unsupported(node, f"{name} (a view's answer must not depend on the wall clock)")
        if isinstance(node, exp.Star):
            raise unsupported(node, "* here")
        if isinstance(node, (exp.Exists, exp.Subquery)):
            raise unsupported(node, "a subquery here")
        if isinstance(node, exp.Anonymous):
            raise unsupported(node, f"the function {node.name}()")
        raise unsupported(node)

    def _interval(self, node: exp.Interval) -> Lit:
        unit = node.args.get("unit")
        amount = node.this
        if unit is None:  # INTERVAL '3 days'
            text = amount.name if isinstance(amount, exp.Literal) else ""
            parts = text.split()
            if len(parts) != 2:
                raise unsupported(node, "this INTERVAL form")
            return F.interval(parts[0], parts[1])
        if isinstance(amount, exp.Neg) and isinstance(amount.this, exp.Literal):
            return F.interval(f"-{amount.this.name}", unit.name)
        if not isinstance(amount, exp.Literal):
            raise unsupported(node, "an INTERVAL of a non-constant amount")
        return F.interval(amount.name, unit.name)

    def _cast(self, node: exp.Expression, arg: Expr) -> Expr:
        to = node.to
        if to.this in (exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ) and not to.expressions:
            target = "timestamp"
        else:
            try:
                target = sql_type(to.sql(dialect="spark").lower(), "CAST")
            except SchemaError:
                raise unsupported(node, f"CAST to {to.sql(dialect='spark')}") from None
        safe = isinstance(node, exp.TryCast) and bool(node.args.get("safe"))
        return F.cast(arg, target, safe=safe)

    def _like(self, node, scope, replace, escape: Expr | None = None) -> Expr:
        e = lambda x: self.expr(x, scope, replace)  # noqa: E731
        args = [_as_string(e(node.this)), e(node.expression)]
        if escape is not None:
            if not (isinstance(escape, Lit) and isinstance(escape.value, str) and len(escape.value) == 1):
                raise unsupported(node, "an ESCAPE other than one constant character")
            args.append(escape)
        if not isinstance(args[1], Lit):
            raise unsupported(node, "LIKE with a pattern that is not a constant")
        out = self._call("ilike" if isinstance(node, exp.ILike) else "like", tuple(args), node)
        return Call("not", (out,), "boolean") if node.args.get("negate") else out

    def _case(self, node: exp.Case, scope, replace) -> Expr:
        e = lambda x: self.expr(x, scope, replace)  # noqa: E731
        subject = e(node.this) if node.this is not None else None
        # ``CASE x WHEN v ...`` of an expression x evaluates x once (a switch): as comparisons it would be
        # evaluated once per WHEN, nested CASEs multiplying it.
        switch = subject is not None and not isinstance(subject, (Col, Lit))
        args: list[Expr] = [subject] if switch else []
        for w in node.args.get("ifs") or ():
            if subject is not None:  # CASE x WHEN v THEN ...
                test = self._call("=", (subject, e(w.this)), node)
                args += [_step(test) if switch else test, e(w.args["true"])]
            else:
                args += [self._bool(w.this, scope, replace), e(w.args["true"])]
        default = node.args.get("default")
        args.append(e(default) if default is not None else Lit(None, "null"))
        first = 1 + switch
        return self._cased("switch" if switch else "case", args,
                           list(range(first, len(args) - 1, 2)) + [len(args) - 1], node)

    def _cased(self, op: str, args: list[Expr], values: list[int], node) -> Expr:
        """CASE / COALESCE: the value arguments cast to their common type (Spark's widening)."""
        try:
            typ = F.common_type([args[i].type for i in values], lambda: f"`{_text(node)}`")
        except F.TypeMismatch as err:
            raise SchemaError(f"SQL: {err}") from None
        out = list(args)
        for i in values:
            if out[i].type != typ and typ != "null":
                out[i] = fold(F.cast(out[i], typ))
        return Call(op, tuple(out), typ)

    def _extreme(self, node, args: list[Expr]) -> Expr:
        """greatest / least (NULLs skipped, as Spark): one call over the arguments cast to their common type."""
        name = "greatest" if isinstance(node, exp.Greatest) else "least"
        if len(args) == 1:
            return args[0]
        typ = common_type(node, args)
        return self._call(name, tuple(fold(retyped_expr(a, typ)) if a.type != "null" else a for a in args), node)


def _step(test: Call) -> Call:
    """A comparison ``x op y`` as a step of a form that holds ``x``: ``Call(op, (Held, y))``."""
    x, y = test.args
    return Call(test.op, (Held(x.type), y), test.type)


def _text(node: exp.Expression) -> str:
    t = node.sql(dialect="spark")
    return t if len(t) <= 80 else t[:77] + "..."


def _as_string(a: Expr) -> Expr:
    return a if a.type in ("string", "null") else F.cast(a, "string")


def need_numbers(node: exp.Expression, *args: Expr) -> None:
    for a in args:
        if not F.numeric(a.type):
            raise SchemaError(f"SQL: `{node.sql(dialect='spark')}` needs numbers, got {a.type}")


def comparable(node: exp.Expression, a: Expr, b: Expr) -> None:
    try:
        F._comparable_types(a, b)
    except F.TypeMismatch as err:
        raise SchemaError(f"SQL: {err} in `{node.sql(dialect='spark')}`") from None


def common_type(node: exp.Expression, args: list[Expr]) -> str:
    try:
        return F.common_type([a.type for a in args], lambda: f"`{_text(node)}`")
    except F.TypeMismatch as err:
        raise SchemaError(f"SQL: {err}") from None


def retyped_expr(e: Expr, typ: str) -> Expr:
    """``e`` as type ``typ`` (a cast unless it already is)."""
    return e if e.type == typ or typ == "null" else F.cast(e, typ)


__all__ = ["Expressions", "AGGREGATES", "unsupported", "literal", "fold", "need_numbers", "comparable",
           "common_type", "retyped_expr"]
