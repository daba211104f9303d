"""The outside world: Spark Structured Streaming, Kafka, sinks, checkpoints."""
