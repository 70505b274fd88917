"""The Flink bridge: polls real Flink clusters' REST APIs and turns what they show into
scalefold's records (docs/bridge.md).

- `rescales`, `translate`, `offsets`, `step`: pure (Flink's JSON in, records out, time as
  an argument);
- `poll`, `sink`, `service`, `cli`: the shell (HTTP, Kafka, the loop).

Like every service it shares only `services.contracts` with the others.
"""
