"""Kafka bytes into rescale records, with the checks of `Codec.decode`, as Spark columns.

Spark decodes the Avro body with spark-avro's `from_avro` and the very `.avsc`
text of `schemas/`: the writer version is picked by the fingerprint in the
single-object header, the newest version is the reader schema. Every check the
Python codec makes has a column here, so a record the scheduler's codec would
reject is rejected here too, with the same reason:

- value missing, shorter than the header, or without the magic C3 01;
- a fingerprint of another record (e.g. a ScalingCommand on the rescales topic);
- an unknown fingerprint;
- a body that does not parse (`from_avro` in PERMISSIVE mode then yields a
  struct of nulls; `jobId` can only be null then, it is a required field);
- trailing bytes after the body. `from_avro` ignores them, so the record is
  re-encoded with its writer schema and the lengths compared.

A record that decodes but is keyed by something other than its job id is
rejected too (`KeyMismatch`): the scheduler writes every rescale keyed by its
job, so anything else came from elsewhere. The same columns decode the Flink
bridge's `FlinkRescale` records (`RescaleSchemas.of(registry, FLINK_RESCALE)`),
whose key is `<cluster>.<jobId>` (`flink_job_key`).

Rejected records become `DeadLetter` messages (same codec, written with
`to_avro`, cut to the limits of `services/contracts/deadletters.py`) instead
of failing the query: a poison message must not stop the history (STYLE.md,
"Three kinds of bad input").
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from services.contracts import records
from services.contracts.codec import HEADER_SIZE, MAGIC
from services.contracts.deadletters import KEY_LIMIT, PAYLOAD_LIMIT, REASON_LIMIT
from services.contracts.schemas import SchemaRegistry, SchemaVersion

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

RECORD = "rescale"
"""The decoded struct column (the newest Rescale schema); meaningless when rejected."""
ERROR = "decode_error"
"""Why a record was rejected, null when it decoded."""
ERROR_CLASS = "error_class"
"""`DecodeError` or `KeyMismatch` for a rejected record, null when it decoded."""
WRITER_VERSION = "writer_version"
SERVICE = "history"


@dataclass(frozen=True)
class RescaleSchemas:
    """The schema versions the history service decodes with and writes."""

    versions: tuple[SchemaVersion, ...]
    """Every version of the rescale record, oldest first."""
    others: tuple[SchemaVersion, ...]
    """Every version of every other record: their fingerprints are known, but wrong here."""
    dead_letter: SchemaVersion
    key_fields: tuple[str, ...] = ("jobId",)
    """The record's fields whose values, joined by dots, must be its Kafka key."""
    registry: SchemaRegistry | None = dataclasses.field(default=None, compare=False, repr=False)
    """Where these came from: every other source's schemas are there too (sources.py)."""

    @classmethod
    def of(cls, registry: SchemaRegistry, record: str = records.RESCALE) -> RescaleSchemas:
        """The versions of `record` (the rescale record, or a real Flink job's record keyed
        by `flink_job_key`: records.FLINK_KEYED)."""
        return cls(
            versions=tuple(registry.versions(record)),
            others=tuple(v for v in registry if v.full_name != record),
            dead_letter=registry.latest(records.DEAD_LETTER),
            key_fields=("cluster", "jobId") if record in records.FLINK_KEYED else ("jobId",),
            registry=registry,
        )

    def of_record(self, record: str) -> RescaleSchemas:
        """The same for another record of the same registry (another source's)."""
        assert self.registry is not None, "built by RescaleSchemas.of"
        return RescaleSchemas.of(self.registry, record)

    @property
    def reader(self) -> SchemaVersion:
        return self.versions[-1]

    def enum_symbols(self, name: str) -> list[str]:
        """The symbols of an enum of the newest rescale schema, e.g. `TerminatedReason`."""
        found = _find_enum(json.loads(self.reader.text), name)
        if found is None:
            raise KeyError(f"{self.reader.full_name} has no enum {name}")
        return found


def _find_enum(node: object, name: str) -> list[str] | None:
    if isinstance(node, dict):
        if node.get("type") == "enum" and node.get("name") == name:
            return list(node["symbols"])
        children: list[object] = list(node.values())
    elif isinstance(node, list):
        children = list(node)
    else:
        return None
    for child in children:
        found = _find_enum(child, name)
        if found is not None:
            return found
    return None


def decode(raw: DataFrame, schemas: RescaleSchemas) -> DataFrame:
    """`raw` (Kafka source columns) plus `rescale`, `writer_version` and `decode_error`."""
    from pyspark.sql import functions as F

    fingerprint = F.expr(f"substring(value, 3, {HEADER_SIZE - 2})")
    framed = F.length("value") >= HEADER_SIZE
    # A generator is an optimizer barrier: without it Catalyst inlines the
    # from_avro expression into every column and filter that reads the record,
    # decoding each message many times (and overflowing Java's 64 KB method limit).
    once = F.explode(F.array(F.when(framed, _from_avro(fingerprint, schemas))))
    parsed = raw.select("*", once.alias("_parsed"))
    parsed = parsed.withColumn(WRITER_VERSION, _writer_version(fingerprint, schemas))
    parsed = parsed.withColumn("_decode_error", _error(schemas, fingerprint))
    key_error = _key_error(schemas.key_fields)
    return (
        parsed.withColumn(ERROR, F.coalesce(F.col("_decode_error"), key_error))
        .withColumn(
            ERROR_CLASS,
            F.when(F.col("_decode_error").isNotNull(), F.lit("DecodeError")).when(
                key_error.isNotNull(), F.lit("KeyMismatch")
            ),
        )
        .drop("_decode_error")
        .withColumnRenamed("_parsed", RECORD)
    )


def _key_error(fields: tuple[str, ...]) -> Column:
    """Why a decoded record's key is not its job id (`fields` joined by dots), or null."""
    from pyspark.sql import functions as F

    job = F.concat_ws(".", *[F.col(f"_parsed.{field}") for field in fields])
    expected = F.encode(job, "UTF-8")
    named = "the job id" if fields == ("jobId",) else ".".join(f"<{f}>" for f in fields)
    # Hex, never decode(): Spark 4 raises on bytes that are not UTF-8.
    shown = F.when(F.col("key").isNull(), F.lit("no key")).otherwise(
        F.concat(F.lit("0x"), F.lower(F.hex(F.substring("key", 1, 32))))
    )
    wrong = F.col("key").isNull() | (F.col("key") != expected)
    return F.when(
        F.col("_parsed.jobId").isNotNull() & wrong,
        F.concat(F.lit(f"the key must be {named} '"), job, F.lit("', got "), shown),
    )


def _from_avro(fingerprint: Column, schemas: RescaleSchemas) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    body = F.expr(f"substring(value, {HEADER_SIZE + 1})")
    options = {"avroSchema": schemas.reader.text, "mode": "PERMISSIVE"}
    chosen = None
    for version in schemas.versions:
        decoded = from_avro(body, version.text, options)
        match = fingerprint == F.lit(version.fingerprint)
        chosen = F.when(match, decoded) if chosen is None else chosen.when(match, decoded)
    assert chosen is not None, "the registry holds no rescale schema"
    return chosen


def _writer_version(fingerprint: Column, schemas: RescaleSchemas) -> Column:
    from pyspark.sql import functions as F

    chosen = F.lit(None).cast("int")
    for version in schemas.versions:
        chosen = F.when(fingerprint == F.lit(version.fingerprint), version.version).otherwise(
            chosen
        )
    return chosen


def _error(schemas: RescaleSchemas, fingerprint: Column) -> Column:
    """The codec's reason for rejecting `value`, or null; the checks run in the codec's order."""
    from pyspark.sql import functions as F

    name = schemas.reader.full_name
    reason = _header_error(F.col("value"))
    for other in schemas.others:
        reason = reason.when(
            fingerprint == F.lit(other.fingerprint),
            F.lit(f"record {other.full_name} is not one of {name}"),
        )
    version_text = F.concat(F.lit(f"{name} v"), F.col(WRITER_VERSION).cast("string"))
    body_length = F.length("value") - HEADER_SIZE
    reencoded = _reencoded_length(schemas)
    return (
        reason.when(
            F.col(WRITER_VERSION).isNull(),
            F.concat(F.lit("unknown writer schema fingerprint "), F.lower(F.hex(fingerprint))),
        )
        .when(
            F.col("_parsed.jobId").isNull(),
            F.concat(F.lit("body is not a valid "), version_text),
        )
        .when(
            reencoded != body_length,
            F.concat(
                (body_length - reencoded).cast("string"),
                F.lit(" trailing bytes after a "),
                version_text,
                F.lit(" record"),
            ),
        )
    )


def _header_error(value: Column) -> Column:
    """A CASE expression for the checks that need only the 10-byte header."""
    from pyspark.sql import functions as F

    magic_hex = F.concat_ws(" ", F.substring(F.hex(value), 1, 2), F.substring(F.hex(value), 3, 2))
    return (
        F.when(value.isNull(), F.lit("no value (a tombstone) where a record was expected"))
        .when(
            F.length(value) < HEADER_SIZE,
            F.format_string(
                f"%d bytes is shorter than the {HEADER_SIZE}-byte header", F.length(value)
            ),
        )
        .when(
            F.substring(value, 1, 2) != F.lit(MAGIC),
            F.concat(F.lit("missing the single-object magic C3 01 (got "), magic_hex, F.lit(")")),
        )
    )


def _reencoded_length(schemas: RescaleSchemas) -> Column:
    """The length of the decoded record written again with its writer schema.

    Later versions only add fields, so a writer version's fields are a subset of
    the reader's: select them and write with that version's `.avsc`.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    length = F.lit(None).cast("int")
    for version in schemas.versions:
        fields = [field["name"] for field in json.loads(version.text)["fields"]]
        record = F.struct(*[F.col("_parsed")[f].alias(f) for f in fields])
        length = F.when(
            F.col(WRITER_VERSION) == version.version, F.length(to_avro(record, version.text))
        ).otherwise(length)
    return length


def dead_letters(decoded: DataFrame, schemas: RescaleSchemas) -> DataFrame:
    """The rejected records of `decoded` as `DeadLetter` messages: binary `key` and `value`.

    The key is the source key, as the dead-letter topic's spec says; the payload
    keeps the original bytes so the record can be repaired and re-sent, cut
    (with a flag) where the broker would refuse the dead letter otherwise.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    value, key, reason = F.col("value"), F.col("key"), F.col(ERROR)
    note = F.format_string("... (%d characters, cut)", F.length(reason))
    message = F.when(F.length(reason) <= REASON_LIMIT, reason).otherwise(
        F.concat(F.substring(reason, 1, REASON_LIMIT - 40), note)
    )
    letter = F.struct(
        F.col("topic").alias("sourceTopic"),
        F.col("partition").alias("sourcePartition"),
        F.col("offset").alias("sourceOffset"),
        F.substring(key, 1, KEY_LIMIT).alias("key"),
        F.coalesce(F.substring(value, 1, PAYLOAD_LIMIT), F.lit(b"")).alias("payload"),
        F.col(ERROR_CLASS).alias("errorClass"),
        message.alias("errorMessage"),
        F.lit(SERVICE).alias("service"),
        F.unix_millis(F.current_timestamp()).alias("timestampMillis"),
        value.isNull().alias("payloadNull"),
        F.coalesce(F.length(value) > PAYLOAD_LIMIT, F.lit(False)).alias("payloadTruncated"),
        F.coalesce(F.length(value), F.lit(0)).cast("long").alias("payloadSize"),
        F.coalesce(F.length(key) > KEY_LIMIT, F.lit(False)).alias("keyTruncated"),
    )
    header = F.lit(MAGIC + schemas.dead_letter.fingerprint)
    return decoded.where(F.col(ERROR).isNotNull()).select(
        F.substring(key, 1, KEY_LIMIT).alias("key"),
        F.concat(header, to_avro(letter, schemas.dead_letter.text)).alias("value"),
    )


def valid(decoded: DataFrame) -> DataFrame:
    """The records of `decoded` that passed every check."""
    from pyspark.sql import functions as F

    return decoded.where(F.col(ERROR).isNull())
