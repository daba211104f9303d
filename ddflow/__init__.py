"""ddflow: differential-dataflow-style incremental computation in Python."""
