"""Which SQL endpoints `history run` serves, where, and where `local status` finds them.

The endpoints themselves are tested against a running service in
tests/history/test_sql_endpoint.py; these are the flags and files around them."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.cli import parse_args
from services.history import handlers
from services.history.endpoint import JdbcConfig, publish_url, withdraw_url
from services.localstack import stack


def _jdbc(*flags: str) -> JdbcConfig | None:
    return handlers._jdbc(parse_args(["history", "run", *flags]))


def test_history_run_serves_jdbc_on_loopback_and_a_free_port_by_default() -> None:
    assert _jdbc() == JdbcConfig("127.0.0.1", 0)
    assert _jdbc("--jdbc-port", "10001", "--sql-host", "0.0.0.0") == JdbcConfig("0.0.0.0", 10001)


@pytest.mark.parametrize("flag", ["--no-jdbc", "--no-sql-endpoint", "--available-now"])
def test_jdbc_is_off_with(flag: str) -> None:
    assert _jdbc(flag) is None


def test_no_jdbc_keeps_spark_connect() -> None:
    args = parse_args(["history", "run", "--no-jdbc"])
    assert handlers._serves_sql(args)


def test_the_thrift_servers_settings_bind_it_and_keep_hives_files_in_the_data_dir(
    tmp_path: Path,
) -> None:
    conf = JdbcConfig("127.0.0.1", 0).spark_conf(tmp_path)
    assert conf["spark.hadoop.hive.server2.thrift.bind.host"] == "127.0.0.1"
    assert conf["spark.hadoop.hive.server2.thrift.port"] == "0"
    assert conf["spark.hadoop.hive.server2.transport.mode"] == "binary"
    assert conf["spark.sql.thriftserver.scheduler.pool"] == "default"
    paths = [Path(v) for k, v in conf.items() if k.endswith(("dir", ".location"))]
    assert len(paths) == 4
    assert all(path.is_relative_to(tmp_path) for path in paths), paths


def test_local_status_lists_the_jdbc_url_beside_the_connect_url(tmp_path: Path) -> None:
    history = stack.history_process(tmp_path)
    data_dir = tmp_path / "history"
    publish_url(data_dir, "sc://127.0.0.1:15002")
    publish_url(data_dir, "jdbc:hive2://127.0.0.1:10000", "jdbc.url")

    assert stack.endpoints(history) == {
        "sql": "sc://127.0.0.1:15002",
        "jdbc": "jdbc:hive2://127.0.0.1:10000",
    }
    withdraw_url(data_dir, "jdbc.url")
    assert stack.endpoints(history) == {"sql": "sc://127.0.0.1:15002"}
