"""The pure parts of the local Flink and `scalefold flink`: the configuration it writes,
BashJavaUtils' answer read, the arguments parsed, the REST bodies built."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from services.cli import parse_args
from services.contracts.flinkrest import (
    FlinkBadAnswerError,
    FlinkNotFoundError,
    checked,
    multipart,
    requirements_body,
)
from services.localstack.flinkcli import merged, parse_bounds, sample_arguments, vertex_ids
from services.localstack.flinkconf import (
    HISTORY_SIZE_KEY,
    SHORT_WAITS,
    FlinkConfig,
    entries,
    render,
    resource_params,
)

ADAPTIVE = "jobmanager.adaptive-scheduler"


def test_the_config_has_the_adaptive_scheduler_history_loopback_and_the_ports() -> None:
    config = entries(FlinkConfig(rest_port=21001, rpc_port=21002))
    assert config["jobmanager.scheduler"] == "adaptive"
    assert config[HISTORY_SIZE_KEY] == "100"
    assert config["rest.port"] == "21001"
    assert config["jobmanager.rpc.port"] == "21002"
    assert {config[key] for key in config if key.endswith(("bind-host", "bind-address"))} == {
        "127.0.0.1"
    }
    assert config["jobmanager.memory.process.size"] == "1000m"
    assert config["taskmanager.memory.process.size"] == "700m"
    # Flink's own defaults unless told otherwise
    assert config[f"{ADAPTIVE}.executing.cooldown-after-rescaling"] == "30000 ms"


def test_short_waits_reach_the_config_in_milliseconds() -> None:
    config = entries(FlinkConfig(1, 2, waits=SHORT_WAITS))
    assert config[f"{ADAPTIVE}.executing.cooldown-after-rescaling"] == "1000 ms"
    assert config[f"{ADAPTIVE}.executing.resource-stabilization-timeout"] == "2000 ms"
    assert config[f"{ADAPTIVE}.submission.resource-stabilization-timeout"] == "1000 ms"
    assert config[f"{ADAPTIVE}.submission.resource-wait-timeout"] == "60000 ms"
    assert (config["heartbeat.interval"], config["heartbeat.timeout"]) == ("1000", "5000")


def test_the_config_renders_one_key_a_line() -> None:
    text = render(FlinkConfig(21001, 21002))
    lines = text.splitlines()
    assert "rest.port: 21001" in lines
    assert len(lines) == len(entries(FlinkConfig(21001, 21002)))
    assert FlinkConfig(21001, 21002).rest_url == "http://127.0.0.1:21001"


def test_bash_java_utils_answer_gives_jvm_flags_and_dynamic_properties() -> None:
    output = (
        "INFO  [] - Loading configuration property: rest.port, 1\n"
        "BASH_JAVA_UTILS_EXEC_RESULT:-Xmx331350016 -Xms331350016 -XX:MaxMetaspaceSize=134217728\n"
        "BASH_JAVA_UTILS_EXEC_RESULT:-D taskmanager.cpu.cores=1.0 -D taskmanager.memory.managed.size=33554432b\n"
    )
    flags, dynamic = resource_params(output)
    assert flags == ["-Xmx331350016", "-Xms331350016", "-XX:MaxMetaspaceSize=134217728"]
    assert dynamic == [
        "-D",
        "taskmanager.cpu.cores=1.0",
        "-D",
        "taskmanager.memory.managed.size=33554432b",
    ]
    with pytest.raises(ValueError, match="no resource parameters"):
        resource_params("Error: could not find or load main class")


def test_bounds_parse_with_vertex_names_holding_spaces_and_arrows() -> None:
    assert parse_bounds(["Bucket=1:4", "Sum -> Discard: Writer=2:2"]) == {
        "Bucket": (1, 4),
        "Sum -> Discard: Writer": (2, 2),
    }
    for wrong in ("Bucket", "Bucket=4", "=1:2", "Bucket=a:2", "Bucket=3:2", "Bucket=0:1"):
        with pytest.raises(ValueError, match=r"Bucket|VERTEX"):
            parse_bounds([wrong])


def test_vertex_names_resolve_to_ids_and_unknown_ones_are_named() -> None:
    vertices = [{"id": "aa", "name": "Bucket"}, {"id": "bb", "name": "Sum"}]
    assert vertex_ids({"Bucket": (1, 2), "bb": (1, 1)}, vertices) == {"aa": (1, 2), "bb": (1, 1)}
    with pytest.raises(ValueError, match=r"no vertex 'Nope'; it has Bucket \(aa\), Sum \(bb\)"):
        vertex_ids({"Nope": (1, 1)}, vertices)


def test_a_change_keeps_the_other_vertices_bounds() -> None:
    current = {
        "aa": {"parallelism": {"lowerBound": 1, "upperBound": 4}},
        "bb": {"parallelism": {"lowerBound": 1, "upperBound": 4}},
    }
    assert merged(current, {"aa": (1, 1)}) == {"aa": (1, 1), "bb": (1, 4)}
    assert requirements_body({"aa": (1, 1)}) == {
        "aa": {"parallelism": {"lowerBound": 1, "upperBound": 1}}
    }


def test_flink_submit_options_become_the_sample_jobs_arguments() -> None:
    args = parse_args(["flink", "submit", "--max-parallelism", "4", "--restart", "none"])
    assert sample_arguments(args) == [
        "--max-parallelism",
        "4",
        "--restart",
        "none",
        "--checkpoint-interval",
        "2000",
        "--rate",
        "20.0",
        "--name",
        "scalefold-sample",
    ]
    with_parallelism = argparse.Namespace(**{**vars(args), "parallelism": 2})
    assert "--parallelism" in sample_arguments(with_parallelism)


def test_the_flink_group_parses_its_verbs() -> None:
    stop = parse_args(["flink", "taskmanager", "stop", "tm-3", "--kill"])
    assert (stop.id, stop.kill) == ("tm-3", True)
    add = parse_args(["flink", "taskmanager", "add", "--count", "2"])
    assert add.count == 2
    requirements = parse_args(["flink", "requirements", "--job", "j", "Bucket=1:2"])
    assert (requirements.job, requirements.bounds) == ("j", ["Bucket=1:2"])
    up = parse_args(["local", "up", "--flink", "--flink-taskmanagers", "3"])
    assert (up.flink, up.flink_taskmanagers) == (True, 3)


def test_answers_are_typed_by_what_the_caller_does() -> None:
    not_found = json.dumps(
        {"errors": ["org.apache.flink.runtime.rest.NotFoundException: Job 00 not found\n\tat x"]}
    ).encode()
    with pytest.raises(FlinkNotFoundError, match=r"404 .*Job 00 not found$"):
        checked("http://f/jobs/00", 404, not_found)
    with pytest.raises(FlinkBadAnswerError, match="HTTP 500: boom") as bad:
        checked("http://f/x", 500, b'{"errors": ["boom"]}')
    assert bad.value.status == 500
    with pytest.raises(FlinkBadAnswerError, match="not JSON"):
        checked("http://f/x", 200, b"<html>")
    assert checked("http://f/x", 202, b"") is None
    assert checked("http://f/x", 200, b'{"a": 1}') == {"a": 1}


def test_a_jar_upload_is_one_multipart_file_field() -> None:
    content_type, body = multipart("jarfile", "sample.jar", b"PK\x03\x04jar")
    boundary = content_type.split("boundary=")[1]
    assert content_type.startswith("multipart/form-data; ")
    assert body.startswith(f"--{boundary}\r\n".encode())
    assert b'name="jarfile"; filename="sample.jar"' in body
    assert body.endswith(f"PK\x03\x04jar\r\n--{boundary}--\r\n".encode())


def test_local_status_lists_taskmanagers_by_number_then_the_actuators_aligned(
    tmp_path: Path,
) -> None:
    """`local status`: tm-2 before tm-10, the actuator's long names after, one column."""
    from services.localstack.flinkstack import cluster_dir, status_lines

    directory = cluster_dir(tmp_path)
    directory.mkdir()
    names = ["tm-10", "tm-provision-bff811b4-1", "tm-2", "tm-provision-6a25e8cd-0", "tm-1"]
    for name in names:
        (directory / f"{name}.pid").write_text(str(os.getpid()))  # a live pid: "running"
    lines = status_lines(tmp_path)[1:]  # after the JobManager's, which never ran here
    shown = [line.split()[0] for line in lines]
    assert shown == ["tm-1", "tm-2", "tm-10", "tm-provision-6a25e8cd-0", "tm-provision-bff811b4-1"]
    assert len({line.index("running") for line in lines}) == 1, lines


def test_taskmanager_stop_takes_the_highest_numbered_by_default() -> None:
    from services.localstack.flink import newest

    assert newest(["tm-1", "tm-10", "tm-2", "tm-provision-a-0"]) == "tm-10"
    assert newest(["tm-provision-a-0", "tm-provision-b-0"]) == "tm-provision-b-0"
    assert newest([]) is None
