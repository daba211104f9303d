"""How deep a SQL text nests, measured without recursion, and its long chains made shallow for sqlglot.

Three passes over a query, each iterative, run before anything recursive
(the policy is :mod:`ddflow.plan.deep`'s):

- :func:`check_tokens` reads the tokens before sqlglot's parser (a
  recursive descent) does: parentheses, ``CASE ... END`` and runs of
  prefix operators (``NOT NOT x``, ``- - x``) nest it; past
  :data:`~ddflow.plan.deep.NESTING_LIMIT` levels the text is refused
  naming the construct, its depth and where it starts to go too deep.
- :func:`check_tree` reads the parse tree before the planner does: a level
  is an operator, a function call or a subquery, but not a parenthesis
  and not the next link of a chain the planner reads in one loop
  (:data:`CHAINS`), so ``a = b = c = ...`` is caught and ``a AND b AND
  ...`` is not.
- :func:`balanced` rebuilds every chain of more than
  :data:`BALANCE_AT` operands as a balanced tree of the same operators in
  the same order.  sqlglot's qualifier walks from each column up to its
  SELECT, so a left-deep chain of 10,000 terms cost it minutes
  (quadratic); balanced, the walk is 14 steps.  The planner reads a
  chain by its in-order walk, which the rebuilding keeps (a parsed tree
  never has a bare chain operator as a right operand: the parser nests
  to the left, parentheses stay a ``Paren``).

>>> import sqlglot
>>> tree = sqlglot.parse_one("SELECT " + " + ".join(f"c{i}" for i in range(100)) + " FROM t")
>>> depth(tree.expressions[0]), depth(balanced(tree).expressions[0])
(101, 9)
>>> check_tokens("SELECT " + "(" * 1200 + "1" + ")" * 1200)
Traceback (most recent call last):
  ...
ddflow.errors.SchemaError: SQL: parentheses nested 1,200 deep at line 1, column 1,008; the limit is 1,000
"""
from __future__ import annotations

import hashlib

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from ddflow.errors import SchemaError
from ddflow.plan.deep import NESTING_LIMIT, too_deep
from ddflow.sql import dialect
from ddflow.sql.sugar import desugared

#: Operators the planner reads as one chain, by class: a chain of one class is one n-ary node however long.
CHAINS: tuple[tuple[type, ...], ...] = ((exp.And,), (exp.Or,), (exp.Add, exp.Sub), (exp.Mul, exp.Div, exp.Mod),
                                        (exp.DPipe,))
_CLASS_OF = {cls: group for group in CHAINS for cls in group}
#: Chains longer than this are balanced for sqlglot's qualifier (shorter ones stay as parsed).
BALANCE_AT = 64

_OPEN = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE}
_CLOSE = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE}
_PREFIX = {TokenType.NOT, TokenType.DASH, TokenType.PLUS, TokenType.EXCLAMATION}
_KINDS = ("parentheses", "CASE expressions", "NOT and sign operators")


def parsed(text: str) -> list[exp.Expression]:
    """The statements of ``text`` (Spark's dialect), its nesting checked (:func:`check_tokens`) before sqlglot's
    recursive parser reads the tokens, which are made once.  A SchemaError for text that does not parse."""
    try:
        toks = dialect.tokenize(text)
        check_tokens(toks)
        return [desugared(s) for s in dialect.parse_tokens(toks, text)]
    except SqlglotError as err:
        raise SchemaError(f"SQL: cannot parse the query: {err}") from None


def check_tokens(toks) -> None:
    """A SchemaError if tokens (or a text) nest deeper than the limit, naming what nests and where.  O(tokens),
    iterative.

    The depth at a token is the parentheses (and brackets) open there, the
    CASEs not yet ended, and the run of prefix operators just before it;
    each level costs sqlglot's parser some 25 Python frames at most.
    """
    if isinstance(toks, str):
        toks = dialect.tokenize(toks)
    parens = cases = run = 0
    deepest, first = (0, 0, 0, 0), None
    opened: list[bool] = []  # per open level: a CASE (True) or a parenthesis
    for tok in toks:
        tt = tok.token_type
        if tt in _PREFIX:
            run += 1
        else:
            run = 0
            if tt in _OPEN:
                parens += 1
                opened.append(False)
            elif tt == TokenType.CASE:
                cases += 1
                opened.append(True)
            elif tt in _CLOSE:
                while opened and opened[-1]:  # CASEs left open inside these parentheses: a parse error later
                    opened.pop()
                    cases -= 1
                if opened:
                    opened.pop()
                    parens -= 1
            elif tt == TokenType.END and opened and opened[-1]:
                opened.pop()
                cases -= 1
        total = parens + cases + run
        if total > deepest[0]:
            deepest = (total, parens, cases, run)
            if total == NESTING_LIMIT + 1:
                first = tok  # where it goes too deep; the scan goes on to say how deep
    total, parens, cases, run = deepest
    if total > NESTING_LIMIT:
        kind = max(zip((parens, cases, run), _KINDS))[1]
        if max(parens, cases, run) < 0.9 * total:
            kind = f"expressions ({parens:,} parentheses, {cases:,} CASEs, {run:,} NOTs and signs)"
        raise too_deep(kind, total, f" at line {first.line}, column {first.col:,}")


def _chain_of(node: exp.Expression) -> tuple[type, ...] | None:
    return _CLASS_OF.get(type(node))


def check_tree(tree: exp.Expression) -> None:
    """A SchemaError if the parse tree nests deeper than the limit in what the planner recurses on.  O(nodes).

    A level is an operator, a function call, a subquery or a set
    operation; a parenthesis is none, nor is the next link of a chain
    (:data:`CHAINS`, and a UNION of UNIONs of one kind: read in one loop).
    """
    stack: list[tuple[exp.Expression, int]] = [(tree, 0)]
    deepest, at = 0, tree
    while stack:
        node, d = stack.pop()
        if _counts(node):
            d += 1
            if d > deepest:
                deepest, at = d, node
        for child in node.iter_expressions():
            stack.append((child, d))
    if deepest > NESTING_LIMIT:
        raise too_deep(_what_nests(at), deepest, _where(at))


def _counts(node: exp.Expression) -> bool:
    """``node`` is a level of nesting for the planner."""
    if isinstance(node, exp.Paren) or not isinstance(node, (exp.Binary, exp.Unary, exp.Func, exp.Predicate,
                                                            exp.Subquery, exp.SetOperation)):
        return False
    if isinstance(node, exp.If) and isinstance(node.parent, exp.Case):  # a WHEN branch: part of its CASE
        return False
    return not _continues(node)


def _continues(node: exp.Expression) -> bool:
    """``node`` is a link of its parent's chain (read in the same loop), not a level of its own."""
    parent = node.parent
    group = _chain_of(node)
    if group is not None:
        if group in ((exp.And,), (exp.Or,)):  # AND and OR chains run through parentheses
            while isinstance(parent, exp.Paren):
                parent = parent.parent
        return parent is not None and _chain_of(parent) == group
    if isinstance(node, exp.Union) and isinstance(parent, exp.Union) and node.arg_key == "this":
        return union_link(node, parent)
    return False


def union_link(node: exp.Union, parent: exp.Union) -> bool:
    """A UNION the planner reads in one loop with the UNION above it: the same kind, no ORDER BY or LIMIT."""
    return bool(node.args.get("distinct")) == bool(parent.args.get("distinct")) and not any(
        node.args.get(k) for k in ("order", "limit", "offset", "with_", "with"))


def _what_nests(node: exp.Expression) -> str:
    """What the ancestors of ``node`` that count as levels mostly are, in words."""
    counts: dict[str, int] = {}
    p: exp.Expression | None = node
    while p is not None:
        if _counts(p):
            name = _NAMES.get(type(p), f"{type(p).__name__} expressions")
            counts[name] = counts.get(name, 0) + 1
        p = p.parent
    if not counts:
        return "expressions"
    name, most = max(counts.items(), key=lambda kv: kv[1])
    return name if most * 2 > sum(counts.values()) else "expressions"


_NAMES = {exp.Subquery: "subqueries", exp.Not: "NOTs", exp.Case: "CASE expressions", exp.Union: "UNIONs",
          exp.Except: "EXCEPTs", exp.Intersect: "INTERSECTs", exp.Neg: "negations", exp.Anonymous: "function calls",
          exp.EQ: "comparisons", exp.NEQ: "comparisons", exp.LT: "comparisons", exp.GT: "comparisons",
          exp.LTE: "comparisons", exp.GTE: "comparisons", exp.Is: "IS tests", exp.Cast: "CASTs",
          exp.Coalesce: "COALESCEs", exp.If: "IFs", exp.Concat: "concat calls", exp.Add: "arithmetic expressions",
          exp.Sub: "arithmetic expressions", exp.Mul: "arithmetic expressions", exp.Div: "arithmetic expressions"}


def _where(node: exp.Expression) -> str:
    """Where ``node`` is in the text, from the first token sqlglot recorded at or below it."""
    for inner in node.walk():
        meta = getattr(inner, "_meta", None) or {}
        if "line" in meta and "col" in meta:
            return f" near line {meta['line']}, column {meta['col']:,}"
    return ""


#: IN lists of more constants than this are set aside while sqlglot qualifies the query (:func:`set_aside`).
ASIDE_AT = 64
_LIST_MARK = "ddflow_in_list"


def set_aside(tree: exp.Expression) -> list[list[exp.Expression]]:
    """Long IN lists of constants taken out of ``tree`` (in place) and returned: each list's place holds one string
    naming its length and a digest of its values, so sqlglot's passes (each walks every node) skip them, and two
    equal lists still read as the same text (a GROUP BY key).  :func:`list_of` gives a list back.  O(nodes)."""
    aside: list[list[exp.Expression]] = []
    for node in list(tree.find_all(exp.In)):
        items = node.expressions
        if len(items) <= ASIDE_AT or not all(_constant(x) for x in items):
            continue
        digest = hashlib.sha1("\x00".join(map(_constant_text, items)).encode()).hexdigest()[:16]
        mark = exp.Literal.string(f"{len(items):,} values #{digest}")
        mark.meta[_LIST_MARK] = len(aside)
        aside.append(items)
        node.set("expressions", [mark])
    return aside


def list_of(node: exp.In, aside: list[list[exp.Expression]] | None) -> list[exp.Expression]:
    """The items of an IN list, as written (a list :func:`set_aside` took out, put back)."""
    items = node.expressions
    if aside and len(items) == 1:
        at = (getattr(items[0], "_meta", None) or {}).get(_LIST_MARK)
        if at is not None:
            return aside[at]
    return items


def _constant_text(x: exp.Expression) -> str:
    """A constant's identity, read off the node (rendering it with sqlglot costs 0.3 ms a value)."""
    if isinstance(x, exp.Neg):
        return "-" + _constant_text(x.this)
    if isinstance(x, exp.Literal):
        return ("s" if x.is_string else "n") + str(x.this)
    return type(x).__name__ + str(x.this)


def _constant(x: exp.Expression) -> bool:
    return isinstance(x, (exp.Literal, exp.Null, exp.Boolean)) or (isinstance(x, exp.Neg)
                                                                   and isinstance(x.this, exp.Literal))


def depth(node: exp.Expression) -> int:
    """The height of a sqlglot tree (its longest path of nodes).  O(nodes), iterative."""
    best = 0
    stack = [(node, 1)]
    while stack:
        n, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in n.iter_expressions())
    return best


def chain_parts(node: exp.Expression, through_parens: bool = False,
                stop=None) -> tuple[list[exp.Expression], list[type]]:
    """The operands of the chain ``node`` heads, left to right, and the operator class before each one after
    the first (in-order: as written, whether the chain is left-deep or :func:`balanced`).

    A chain is ``node`` and its descendants of the same group in
    :data:`CHAINS` (through parentheses for AND and OR when
    ``through_parens``); ``stop(n)`` true ends it at ``n`` (an operand the
    planner already has).  O(chain), iterative.
    """
    group = _chain_of(node)
    operands: list[exp.Expression] = []
    ops: list[type] = []
    stack: list = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, type):
            ops.append(n)
            continue
        inner = n
        if through_parens and n is not node:
            while isinstance(inner, exp.Paren) and _chain_of(inner.this) == group:
                inner = inner.this
        if _chain_of(inner) == group and (inner is node or stop is None or not stop(inner)):
            stack.append(inner.expression)
            stack.append(type(inner))
            stack.append(inner.this)
        else:
            operands.append(n)
    return operands, ops


def balanced(tree: exp.Expression) -> exp.Expression:
    """``tree`` with each bare chain longer than :data:`BALANCE_AT` rebuilt as a balanced tree, in place.  O(nodes).

    The operands and operators stay in written order; the rebuilt chain
    reuses the chain's own operator nodes (their comments and positions).
    """
    heads = [n for n in tree.walk() if _chain_of(n) is not None
             and not (n.parent is not None and _chain_of(n.parent) == _chain_of(n))]
    for head in heads:
        nodes: list[exp.Expression] = []  # the operator nodes, in order (each one's right operand follows it)
        operands: list[exp.Expression] = []
        stack: list = [head]
        while stack:
            n = stack.pop()
            if isinstance(n, tuple):
                nodes.append(n[0])
                continue
            if n is not head and _chain_of(n) != _chain_of(head):
                operands.append(n)
                continue
            if _chain_of(n) is None:
                operands.append(n)
                continue
            stack.append(n.expression)
            stack.append((n,))
            stack.append(n.this)
        if len(operands) <= BALANCE_AT:
            continue
        parent, key, index = head.parent, head.arg_key, head.index
        root = _build(nodes, operands, 0, len(operands) - 1)
        if parent is None:
            tree = root
        else:
            parent.set(key, root, index)
    return tree


def _build(nodes: list[exp.Expression], operands: list[exp.Expression], lo: int, hi: int) -> exp.Expression:
    """Operands ``lo..hi`` as a balanced tree; ``nodes[i - 1]`` is the operator between operands ``i - 1`` and
    ``i``.  Recursion depth log2(operands)."""
    if lo == hi:
        return operands[lo]
    mid = (lo + hi + 1) // 2
    op = nodes[mid - 1]
    left, right = _build(nodes, operands, lo, mid - 1), _build(nodes, operands, mid, hi)
    op.set("this", left)
    op.set("expression", right)
    return op
