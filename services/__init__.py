"""scalefold: Apache Flink's Adaptive Scheduler as an event-sourced pipeline."""
