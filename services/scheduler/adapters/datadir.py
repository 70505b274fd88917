"""The worker's table directory under --data-dir: one process at a time, one cluster.

With `--store rocksdb://` Faust keeps each table partition in a RocksDB database
under `--data-dir/<app id>/v1/tables`, together with the changelog offset it is
current to. Two things would go wrong there that `memory://` never meets, and
both are settled before Faust starts.
"""

from __future__ import annotations

import fcntl
import logging
import re
import shutil
import uuid
from pathlib import Path
from typing import IO

from services.scheduler.adapters.app import ServiceSettings, table_dir

log = logging.getLogger("scalefold.scheduler")

EXIT_DATA_DIR = 73  # EX_CANTCREAT (sysexits.h): --data-dir cannot be used
CLUSTER_FILE = "kafka-cluster-id"
IDENTITY_FILE = "group-instance-id"


class DataDirError(RuntimeError):
    """--data-dir cannot hold this worker's tables; the message is the one line to print."""


def claim_data_dir(settings: ServiceSettings) -> IO[str] | None:
    """Lock the worker's table directory for this process when its tables are in RocksDB.

    Faust opens a partition's RocksDB database only when the partition is
    assigned, and retries a locked one 30 times a second apart before the worker
    dies with RocksDB's own message: a second worker on the same directory would
    stall, then crash, at some later rebalance. An OS lock (flock) taken at the
    start fails at once instead, and the kernel drops it when the process dies,
    even by SIGKILL, so a restarted worker is never locked out by its killed
    predecessor. The returned file holds the lock: keep it open."""
    tables = table_dir(settings)
    try:
        tables.mkdir(parents=True, exist_ok=True)
        if settings.store != "rocksdb://":
            return None
        handle = (tables / "worker.lock").open("w")
    except OSError as error:
        raise DataDirError(f"cannot use --data-dir {settings.data_dir}: {error}") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise DataDirError(
            f"another scheduler worker is using --data-dir {settings.data_dir} "
            f"({settings.app_id}'s RocksDB tables open to one process only); "
            "give each worker its own --data-dir"
        ) from None
    return handle


def keep_tables_of(settings: ServiceSettings, cluster_id: str) -> bool:
    """Discard stored tables written against another Kafka cluster; True if kept.

    A stored table is a cache of its changelog, valid for the cluster whose
    changelog it was read from: the offset stored with it means nothing on a new
    broker of the same topic names (a fresh `scalefold local run`, a recreated
    cluster). Faust would resume from that offset, or, on an empty changelog,
    keep the old jobs as live ones. Called with the directory locked."""
    tables = table_dir(settings)
    marker = tables / CLUSTER_FILE
    try:
        known = marker.read_text().strip()
    except FileNotFoundError:
        known = None
    kept = known == cluster_id
    if not kept and (tables / "v1").exists():
        log.warning(
            "discarding the tables in %s: written against Kafka cluster %s, this is %s",
            tables,
            known or "(unknown)",
            cluster_id,
        )
        shutil.rmtree(tables / "v1")
    marker.write_text(cluster_id + "\n")
    return kept


def drop_damaged_tables(settings: ServiceSettings) -> list[Path]:
    """Remove the table partitions whose RocksDB files are damaged; the removed ones.

    A store is a cache of its changelog topic: one removed is rebuilt from it by Faust's
    recovery, as on a new worker. One left damaged is worse than none: RocksDB opens a
    store whose data block has a bad checksum and its iterator just ends there, so
    Faust's scan of the recovered table (the timers' rescan) would miss jobs without a
    word, and a read of such a job fail the worker. Each store is opened read-only and
    read through with checksums verified (20,000 states of 1.3 KB: 0.03-0.06 s); only
    RocksDB's own verdict of damage (a Corruption status, a file its manifest names
    gone) removes one. Called with the directory locked, before Faust opens any."""
    dropped = []
    for store in sorted((table_dir(settings) / "v1" / "tables").glob("*.db")):
        damage = _damage(store)
        if damage is not None:
            log.warning(
                "the table store %s is damaged (RocksDB: %s); removed it: Faust rebuilds "
                "it from its changelog topic",
                store,
                damage,
            )
            shutil.rmtree(store)
            dropped.append(store)
    return dropped


def _damage(store: Path) -> str | None:
    """RocksDB's complaint about the store, if it is damage; None if it reads through."""
    from rocksdict import AccessType, Options, Rdict, ReadOptions

    try:
        db = Rdict(str(store), Options(raw_mode=True), access_type=AccessType.read_only())
    except Exception as error:  # rocksdict raises a bare Exception with RocksDB's status
        return _if_damage(error)
    try:
        entries = db.iter(ReadOptions())
        entries.seek_to_first()
        while entries.valid():
            entries.next()
        entries.status()
    except Exception as error:
        return _if_damage(error)
    finally:
        db.close()
    return None


def _if_damage(error: Exception) -> str | None:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    if text.startswith("Corruption") or ("IO error" in text and "No such file" in text):
        return text
    log.warning("could not check the table store (RocksDB: %s); leaving it to Faust", text)
    return None


def worker_identity(settings: ServiceSettings) -> str:
    """The worker's Kafka group.instance.id: an id kept in its locked directory, and
    its web address.

    The directory holds the worker's tables, so it is the worker's identity: a
    worker restarted on it (after a crash, a kill -9, an upgrade) rejoins the
    consumer group as the same static member and gets its partitions back at once,
    without waiting for its predecessor's session to time out (KIP-345). Called
    with the directory locked, so no two live workers share an id. The address is
    part of it because Faust writes each member's web address into the assignment
    it keeps for the member, and a worker handed an assignment naming another
    address fails Faust's check and stalls: restarted on another port, the worker
    joins as a new member, as it would without static membership (`with_address`)."""
    path = table_dir(settings) / IDENTITY_FILE
    try:
        known = path.read_text().strip()
    except FileNotFoundError:
        known = ""
    if not known:
        known = f"{settings.app_id}-{uuid.uuid4().hex[:12]}"
        path.write_text(known + "\n")
    return with_address(known, settings)


def with_address(instance_id: str, settings: ServiceSettings) -> str:
    """A group.instance.id with the worker's web address after it, in Kafka's alphabet.

    Faust keeps each member's web address in the member's assignment and asserts it
    at the next join: a static member restarted on another port failed that check
    (aiokafka's coordinator routine died) and never became ready. With the address
    in the id, it joins as a new member instead."""
    # Kafka takes letters, digits, '.', '_' and '-' in an id
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{instance_id}-{settings.web_host}-{settings.web_port}")
