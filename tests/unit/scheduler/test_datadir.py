"""The scheduler's table directory: one worker at a time with RocksDB, one app, one cluster."""

from __future__ import annotations

import dataclasses
import fcntl
import re
from pathlib import Path

import pytest

from services.cli import main
from services.contracts import Settings
from services.scheduler.adapters.app import ServiceSettings, table_dir
from services.scheduler.adapters.datadir import (
    CLUSTER_FILE,
    EXIT_DATA_DIR,
    DataDirError,
    claim_data_dir,
    drop_damaged_tables,
    keep_tables_of,
    with_address,
    worker_identity,
)


def settings(data: Path, prefix: str = "unit.", store: str = "rocksdb://") -> ServiceSettings:
    return ServiceSettings(Settings(topic_prefix=prefix), data_dir=data, store=store)


def test_rocksdb_is_the_default_store() -> None:
    assert ServiceSettings(Settings()).store == "rocksdb://"


def test_each_app_keeps_its_tables_in_its_own_directory(tmp_path: Path) -> None:
    # Faust names a table's files by the table alone: two prefixes on one
    # --data-dir would otherwise read each other's jobs and stored offsets
    one, other = settings(tmp_path, "a."), settings(tmp_path, "b.")
    assert table_dir(one) == tmp_path / "a.scheduler"
    assert table_dir(one) != table_dir(other)


def test_a_second_worker_on_the_directory_is_refused_until_the_first_is_gone(
    tmp_path: Path,
) -> None:
    first = claim_data_dir(settings(tmp_path))
    assert first is not None
    with pytest.raises(DataDirError, match=f"using --data-dir {tmp_path} .*its own --data-dir"):
        claim_data_dir(settings(tmp_path))
    assert claim_data_dir(settings(tmp_path, "other.")) is not None  # another app's directory
    first.close()  # as the kernel does when the worker dies, even by SIGKILL
    again = claim_data_dir(settings(tmp_path))
    assert again is not None
    again.close()


def test_memory_tables_take_no_lock(tmp_path: Path) -> None:
    held = claim_data_dir(settings(tmp_path))
    assert held is not None
    assert claim_data_dir(settings(tmp_path, store="memory://")) is None
    held.close()


def test_an_unusable_directory_is_one_error_naming_it(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with pytest.raises(DataDirError, match=f"cannot use --data-dir {blocked}: "):
        claim_data_dir(settings(blocked))


def test_the_command_says_so_in_one_line_and_exits_73(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tables = table_dir(settings(tmp_path))
    tables.mkdir(parents=True)
    with (tables / "worker.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a running worker's lock
        command = ["scheduler", "--data-dir", str(tmp_path)]
        code = main(["--topic-prefix", "unit.", "--bootstrap-servers", "127.0.0.1:1", *command])
    assert code == EXIT_DATA_DIR == 73
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        f"scalefold scheduler: another scheduler worker is using --data-dir {tmp_path}"
    )


def test_tables_of_another_cluster_are_discarded(tmp_path: Path) -> None:
    worker = settings(tmp_path)
    tables = table_dir(worker)
    stored = tables / "v1" / "tables" / "jobs-0.db"
    stored.mkdir(parents=True)
    assert not keep_tables_of(worker, "cluster-a")  # unknown: not to be trusted
    assert not stored.exists()
    stored.mkdir(parents=True)
    assert keep_tables_of(worker, "cluster-a")
    assert stored.exists()
    assert not keep_tables_of(worker, "cluster-b")  # a new broker of the same topic names
    assert not stored.exists()
    assert (tables / CLUSTER_FILE).read_text() == "cluster-b\n"


def test_a_worker_keeps_its_group_instance_id_across_restarts(tmp_path: Path) -> None:
    worker = settings(tmp_path / "one")
    table_dir(worker).mkdir(parents=True)
    first = worker_identity(worker)
    assert worker_identity(worker) == first  # the same directory: the same static member
    assert first.startswith("unit.scheduler-") and first.endswith("-127.0.0.1-6066")
    other = settings(tmp_path / "two")
    table_dir(other).mkdir(parents=True)
    assert worker_identity(other) != first  # each directory its own member


def test_the_group_instance_id_follows_the_web_address_in_kafkas_alphabet(
    tmp_path: Path,
) -> None:
    # Faust keeps each member's web address in its assignment: another address is
    # another member, and ':' of an IPv6 host is not a character Kafka takes
    worker = settings(tmp_path)
    table_dir(worker).mkdir(parents=True)
    moved = worker_identity(dataclasses.replace(worker, web_host="::1", web_port=7000))
    assert moved != worker_identity(worker)
    assert moved.endswith("-__1-7000")
    assert re.fullmatch(r"[A-Za-z0-9._-]+", moved)


def test_an_id_of_the_users_gets_the_web_address_too(tmp_path: Path) -> None:
    # --group-instance-id ID: restarted on another port, the worker must be a new
    # member, as with the default id (Faust would stall a static member moved there)
    worker = settings(tmp_path)
    assert with_address("my worker", worker) == "my_worker-127.0.0.1-6066"
    moved = dataclasses.replace(worker, web_port=7000)
    assert with_address("my worker", moved) == "my_worker-127.0.0.1-7000"


def _store(path: Path, entries: int = 5_000) -> Path:
    """A table partition as Faust's RocksDB store writes one (raw mode), flushed to a file."""
    import os

    from rocksdict import Options, Rdict

    db = Rdict(str(path), Options(raw_mode=True))
    for index in range(entries):
        db[b"job-%06d" % index] = os.urandom(200)
    db.flush()
    db.close()
    return path


def test_a_damaged_table_store_is_removed_and_a_sound_one_kept(tmp_path: Path) -> None:
    config = settings(tmp_path)
    tables = table_dir(config) / "v1" / "tables"
    tables.mkdir(parents=True)
    sound, flipped, current = (_store(tables / f"jobs-{n}.db") for n in range(3))
    sst = next(flipped.glob("*.sst"))
    with sst.open("r+b") as data:  # a data block's bytes, as a disk fault leaves them
        data.seek(sst.stat().st_size // 2)
        data.write(b"\xff" * 64)
    (current / "CURRENT").write_text("garbage")
    assert drop_damaged_tables(config) == [flipped, current]
    assert sound.is_dir()
    assert not flipped.exists()
    assert not current.exists()
    assert drop_damaged_tables(config) == []


@pytest.mark.parametrize(
    ("status", "damaged"),
    [
        ("Corruption: CURRENT file does not end with newline", True),
        ("IO error: No such file or directory: /d/jobs-0.db/000009.sst", True),
        ("IO error: While lock file: /d/jobs-0.db/LOCK: Resource temporarily unavailable", False),
        ("IO error: No space left on device", False),
        (
            "Invalid argument: /d/jobs-0.db/CURRENT: does not exist (create_if_missing is false)",
            False,
        ),
    ],
)
def test_only_rocksdbs_verdict_of_damage_removes_a_store(status: str, damaged: bool) -> None:
    from services.scheduler.adapters.datadir import _if_damage

    assert (_if_damage(Exception(status)) is not None) is damaged
