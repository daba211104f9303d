"""Datalog in Soufflé's dialect over the plan IR: parse, check, stratify, plan, lower (see ``docs/datalog.md``).

Modules: :mod:`~ddflow.datalog.syntax` (the tree), :mod:`~ddflow.datalog.parser` (with
:mod:`~ddflow.datalog.components`, which expands ``.comp``/``.init``),
:mod:`~ddflow.datalog.program` (checks), :mod:`~ddflow.datalog.scope` (where aggregates stand and what they
read), :mod:`~ddflow.datalog.subsume` (``<=`` rules as rules), :mod:`~ddflow.datalog.functors` (Soufflé's
functors Spark lacks), :mod:`~ddflow.datalog.tokens`, :mod:`~ddflow.datalog.stratify`,
:mod:`~ddflow.datalog.planner` (to plan IR; terms: :mod:`~ddflow.datalog.expressions`), :mod:`~ddflow.datalog.hints`,
:mod:`~ddflow.datalog.frontend`, :mod:`~ddflow.datalog.files` (Soufflé's fact files) and
``python -m ddflow.datalog`` (:mod:`~ddflow.datalog.__main__`).

Every Soufflé construct is either built or refused by name at ``flow.datalog``: docs/datalog.md has
the table.
"""
