"""SQL views: Spark SQL text planned into :mod:`ddflow.plan` (``planner``); ``Dataflow.sql`` builds them."""
