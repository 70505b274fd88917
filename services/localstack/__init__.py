"""scalefold's local stack: a real Kafka broker (and Spark's jars) on this machine."""
