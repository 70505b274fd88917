"""The contracts every scalefold service shares: topics, Avro codec, settings, the
scheduler's input events and job configuration keys, the event log, record rendering."""

from services.contracts.codec import Codec, Decoded, DecodeError, EncodeError
from services.contracts.schemas import SchemaRegistry, SchemaVersion
from services.contracts.settings import KafkaSecurity, Secret, Settings, SettingsError
from services.contracts.topics import Topics, TopicSpec

__all__ = [
    "Codec",
    "DecodeError",
    "Decoded",
    "EncodeError",
    "KafkaSecurity",
    "SchemaRegistry",
    "SchemaVersion",
    "Secret",
    "Settings",
    "SettingsError",
    "TopicSpec",
    "Topics",
]
