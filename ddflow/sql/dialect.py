"""Spark SQL as ddflow reads it: sqlglot's Spark dialect, changed where it would lose what the user wrote.

Every construct is recognised on the tokens or the tree, never by searching
the text, so a string literal or a comment can never change how a query is
read.  The changes:

- ``TRUNC(d, unit)`` and ``DATE_TRUNC(unit, ts)`` keep their unit as
  written.  sqlglot expands ``'Q'`` to ``QUARTER``, a unit Spark does not
  know (Spark gives NULL for it), so the expansion would change the answer.
- Functions with Spark datetime patterns (``date_format``, ``to_date(s,
  pattern)``, ``unix_timestamp`` ...) and the calendar functions are read
  as plain calls of their arguments as written (:data:`AS_WRITTEN`):
  sqlglot would turn a pattern into its own strftime form.
- ``GROUP BY window(...)`` first in its list is read as a call (sqlglot
  would read ``WINDOW`` as a named-window clause): the call is put in
  parentheses on the tokens, the same grouping.

>>> tree = parse_tokens(tokenize("SELECT trunc(d, 'Q') FROM t GROUP BY window(ts, '1 minute')"), "")[0]
>>> tree.find(exp.DateTrunc).unit.name, tree.args["group"].expressions[0].sql()
('Q', "(WINDOW(ts, '1 minute'))")
"""
from __future__ import annotations

from sqlglot import expressions as exp
from sqlglot.dialects.spark import Spark
from sqlglot.helper import seq_get
from sqlglot.tokens import Token, TokenType


def _with_unit(node: exp.Expression, unit) -> exp.Expression:
    """``node`` with its unit as written: sqlglot's constructors expand an abbreviation and read a column as a
    literal, so the unit is set past them."""
    node.set("unit", unit)
    return node


def _trunc(args: list) -> exp.Expression:
    return _with_unit(exp.DateTrunc(unit=exp.Literal.string("YEAR"), this=seq_get(args, 0)), seq_get(args, 1))


def _date_trunc(args: list) -> exp.Expression:
    return _with_unit(exp.TimestampTrunc(this=seq_get(args, 1), unit=exp.var("YEAR")), seq_get(args, 0))


#: Library functions read as plain calls (ddflow.plan.maths and ddflow.plan.strings type them by name).
LIBRARY = ("SIN", "COS", "TAN", "ASIN", "ACOS", "ATAN", "SINH", "COSH", "TANH", "ASINH", "ACOSH", "ATANH", "COT",
           "SEC", "CSC", "DEGREES", "RADIANS", "EXPM1", "LOG1P", "RINT", "ATAN2", "HYPOT", "E", "PI", "ISNAN",
           "NANVL", "POSITIVE", "NEGATIVE", "OCTET_LENGTH", "BIT_LENGTH", "SPACE", "SUBSTRING_INDEX", "BTRIM",
           "MD5", "SHA1", "SHA", "SHA2", "CRC32", "HEX", "BIN", "SHIFTRIGHTUNSIGNED", "FIND_IN_SET",
           "GET_JSON_OBJECT", "LUHN_CHECK", "FORMAT_NUMBER", "TRY_MOD", "MASK", "WEEKDAY")
#: Functions read as plain calls of their arguments as written: sqlglot would turn their datetime patterns into
#: its own strftime forms, or rewrite them into other functions (ddflow.plan.datetimes reads Spark's patterns).
AS_WRITTEN = ("DATE_FORMAT", "FROM_UNIXTIME", "UNIX_TIMESTAMP", "TO_UNIX_TIMESTAMP", "LAST_DAY", "NEXT_DAY",
              "MONTHS_BETWEEN", "MAKE_DATE", "UNIX_DATE", "UNIX_SECONDS", "UNIX_MILLIS", "UNIX_MICROS",
              "DATE_FROM_UNIX_DATE", "TIMESTAMP_SECONDS", "TIMESTAMP_MILLIS", "TIMESTAMP_MICROS", "TRY_TO_DATE",
              "TRY_TO_TIMESTAMP",
              *LIBRARY)


def _as_written(name: str):
    return lambda args: exp.Anonymous(this=name, expressions=args)


def _with_pattern(name: str, default):
    """``TO_DATE(s, pattern)`` as written; with one argument, sqlglot's own reading (a CAST)."""
    return lambda args, **kw: exp.Anonymous(this=name, expressions=args) if len(args) > 1 else default(args, **kw)


class TrySum(exp.Expression, exp.AggFunc):
    """Spark's ``try_sum(x)``: SUM, NULL where it overflows its type (sqlglot has no node for it)."""


class TryAvg(exp.Expression, exp.AggFunc):
    """Spark's ``try_avg(x)``: AVG, NULL where its sum overflows."""


class PercentileDisc(exp.Expression, exp.AggFunc):
    """``PERCENTILE_DISC(quantile) WITHIN GROUP (ORDER BY this [DESC])`` (:mod:`ddflow.sql.sugar` makes it): a node
    of its own, so its text tells it from PERCENTILE_CONT and from its other order (sqlglot writes both as
    PERCENTILE_APPROX)."""

    arg_types = {"this": True, "quantile": True, "desc": False}


def _one_side_trim(position: str):
    """``ltrim(str)`` / ``rtrim(str)``, and Spark's two-argument ``ltrim(trimStr, str)`` (sqlglot reads rtrim's two
    arguments the other way round)."""
    def build(args: list) -> exp.Expression:
        if len(args) == 2:
            return exp.Trim(this=args[1], expression=args[0], position=position)
        return exp.Trim(this=seq_get(args, 0), position=position)
    return build


class DdflowSpark(Spark):
    """Spark's dialect with the unit-keeping TRUNC and DATE_TRUNC, and datetime patterns as written (see the
    module docstring)."""

    class Parser(Spark.Parser):
        FUNCTIONS = {**Spark.Parser.FUNCTIONS, "TRUNC": _trunc, "DATE_TRUNC": _date_trunc,
                     **{n: _as_written(n) for n in AS_WRITTEN},
                     "STD": lambda args: exp.Stddev(this=seq_get(args, 0)),
                     "LTRIM": _one_side_trim("LEADING"), "RTRIM": _one_side_trim("TRAILING"),
                     "TRY_SUM": lambda args: TrySum(this=seq_get(args, 0)),
                     "TRY_AVG": lambda args: TryAvg(this=seq_get(args, 0)),
                     "TO_DATE": _with_pattern("TO_DATE", Spark.Parser.FUNCTIONS["TO_DATE"]),
                     "TO_TIMESTAMP": _with_pattern("TO_TIMESTAMP", Spark.Parser.FUNCTIONS["TO_TIMESTAMP"])}


DIALECT = DdflowSpark()


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text`` in Spark's lexical rules.  O(len(text))."""
    return DIALECT.tokenize(text)


def _grouping_windows(toks: list[Token]) -> list[Token]:
    """``GROUP BY window(...)`` as ``GROUP BY (window(...))``: the tokens, with the call put in parentheses."""
    out: list[Token] = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        out.append(tok)
        i += 1
        if tok.token_type is TokenType.GROUP_BY and i + 1 < len(toks) and toks[i].token_type is TokenType.WINDOW \
                and toks[i + 1].token_type is TokenType.L_PAREN:
            depth, j = 0, i + 1
            while j < len(toks):
                depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(toks[j].token_type, 0)
                if depth == 0:
                    break
                j += 1
            first, last = toks[i], toks[min(j, len(toks) - 1)]
            out.append(Token(TokenType.L_PAREN, "(", first.line, first.col, first.start, first.start))
            out.extend(toks[i:j + 1])
            out.append(Token(TokenType.R_PAREN, ")", last.line, last.col, last.end, last.end))
            i = j + 1
    return out


def parse_tokens(toks: list[Token], text: str) -> list[exp.Expression]:
    """The statements the tokens of ``text`` make (sqlglot's errors propagate)."""
    return [s for s in DIALECT.parser().parse(_grouping_windows(toks), text) if s is not None]


def transpilable(text: str) -> list[exp.Expression]:
    """The statements of ``text`` in sqlglot's own Spark dialect, for writing them in another engine's SQL (an
    oracle's): sqlglot's readings of patterns and units, which it knows how to transpile, with ``GROUP BY
    window(...)`` read as a call as :func:`parse_tokens` reads it.  O(len(text)).

    >>> transpilable("SELECT date_format(ts, 'HH:mm') FROM t GROUP BY window(ts, '1 minute')")[0].sql("duckdb")
    "SELECT STRFTIME(CAST(ts AS TIMESTAMP), '%H:%M') FROM t GROUP BY (WINDOW(ts, '1 minute'))"
    """
    spark = Spark()
    return [s for s in spark.parser().parse(_grouping_windows(spark.tokenize(text)), text) if s is not None]
