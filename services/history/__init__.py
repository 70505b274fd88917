"""The history service: rescale records from Kafka into Parquet, queried with Spark SQL."""
