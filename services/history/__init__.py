"""The history service: rescale records from Kafka into Delta Lake tables, queried with Spark SQL."""
