"""The scheduler: Flink's Adaptive Scheduler as a pure fold (core), served by Faust (adapters)."""
