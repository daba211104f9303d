"""The logical plan: relational operators over named columns (``ir``), vectorized scalar expressions
(``expr``), and their lowering to ddflow operators (``lower``).  Independent of SQL syntax: the SQL
front end (:mod:`ddflow.sql`) and a Datalog one build the same IR."""
