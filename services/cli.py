"""`scalefold`: the one command for every scalefold service and tool.

This is the entry point, the only module that reads the environment: it builds
`Settings` once and hands them to the subcommand. Subcommands import their
heavy dependencies (Faust, pyspark) only when they run.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence

from services.clicontext import Context, Handler
from services.contracts.access import (
    LIBRDKAFKA_LOGGER,
    KafkaConnectionError,
    without_reported_errors,
)
from services.contracts.ambiguity import Findings
from services.contracts.foresight import Forecast
from services.contracts.settings import Settings, SettingsError
from services.localstack.layout import RUN_ROOT, cache_dir

EXIT_CLOSED_PIPE = 128 + 13  # what a shell reports for a command ended by SIGPIPE

DESCRIPTION = """\
scalefold folds Kafka events through Apache Flink's Adaptive Scheduler and keeps
the rescale history in Delta Lake tables (Parquet files) for Spark SQL.

Kafka connection (environment):
  SCALEFOLD_BOOTSTRAP_SERVERS   host:port[,...]; default: the local stack of
                                `scalefold local up`, else 127.0.0.1:9092
  SCALEFOLD_TOPIC_PREFIX        default "scalefold."
  SCALEFOLD_SECURITY_PROTOCOL   PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
  SCALEFOLD_SASL_MECHANISM / _SASL_USERNAME / _SASL_PASSWORD (or _SASL_PASSWORD_FILE)
  SCALEFOLD_SSL_CA_LOCATION / _SSL_CERTIFICATE_LOCATION / _SSL_KEY_LOCATION / _SSL_KEY_PASSWORD
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scalefold",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--bootstrap-servers", help="overrides SCALEFOLD_BOOTSTRAP_SERVERS")
    parser.add_argument("--topic-prefix", help="overrides SCALEFOLD_TOPIC_PREFIX")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log more: DEBUG, and the Kafka clients' and py4j's own lines",
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    from services.actuator.cli import register as register_actuator
    from services.bridge.cli import register as register_bridge
    from services.history.cli import register as register_history
    from services.localstack.cli import register as register_local
    from services.scheduler.cli import register as register_scheduler
    from services.tools.cli import register as register_tools

    register_local(commands)
    register_actuator(commands)
    register_scheduler(commands)
    register_tools(commands)
    register_history(commands)
    register_bridge(commands)
    _register_flink(commands)
    return parser


def _register_flink(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The `flink` group: its verbs come from more than one module."""
    from services.history.flinkcli import register as register_flink_compare
    from services.localstack.flinkcli import register as register_flink_local

    flink = commands.add_parser(
        "flink",
        help="a real Flink 2.3 cluster: submit jobs, add or stop TaskManagers, set requirements, "
        "compare its rescales with scalefold's predictions",
        description="Work with a real Flink 2.3 cluster, by default the local stack's "
        "(`scalefold local up --flink`; docs/flink.md).",
    )
    verbs = flink.add_subparsers(title="verbs", metavar="VERB", required=True)
    register_flink_local(verbs)
    register_flink_compare(verbs)


def _local_bootstrap() -> str | None:
    """The address `scalefold local up` wrote, so the CLI finds the local stack."""
    try:
        return (RUN_ROOT / "local" / "bootstrap").read_text().strip() or None
    except OSError:
        return None


def _local_client_env() -> dict[str, str]:
    """The CLI's settings for the running secured local stack (`local up --secure`)."""
    from services.localstack.secure import read_client_env

    return read_client_env(RUN_ROOT / "local")


def _split_compare(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """`--compare` takes the rest of the line verbatim (it contains `--` and `-D`)."""
    if "--compare" not in argv:
        return argv, None
    cut = argv.index("--compare") + 1
    return argv[:cut], argv[cut:]


def _chosen(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The innermost (sub)command parser that `argv` names (`cluster add-taskmanagers`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for number, token in enumerate(argv):
                if token in action.choices:
                    return _chosen(action.choices[token], argv[number + 1 :])
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line as `main` reads it (argparse exits on an error, as usual)."""
    head, compare = _split_compare(list(argv))
    args, extra = build_parser().parse_known_args(head)
    if extra and not getattr(args, "takes_extra", False):
        # the subcommand's usage, not the top level's: the mistake is in its arguments
        _chosen(build_parser(), head).error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    if compare is not None:
        args.compare = compare
    return args


def run() -> None:
    """The `scalefold` command: `main`, and exit with its code."""
    sys.exit(main(exit_on_refusal=True))


def _ambiguities(settings: Settings, job: str) -> Findings:
    """The scheduler's answer to `flink compare`: which pairs of `job` are ambiguous."""
    from services.scheduler.observationcli import find

    return find(settings, job)


def _forecasts(settings: Settings, job: str, targets: Mapping[str, int], now_ms: int) -> Forecast:
    """The scheduler's answer to the history's autoscaler: what a decision would start."""
    from services.scheduler.foresight import forecast

    return forecast(settings, job, targets, now_ms)


def main(argv: Sequence[str] | None = None, *, exit_on_refusal: bool = False) -> int:
    """Run one command; its exit code. With `exit_on_refusal` (the command itself, not a
    caller in the same process) a refusal's line is the process's last act: `os._exit`,
    after flushing, skips the interpreter's finalization, in which a librdkafka client
    left behind by the refusal (its error callback raised it) twice crashed the process
    with SIGSEGV after the line was out (CI, 2026-11-27: exit -11 instead of 77)."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.verbose:
        args.log_level = "DEBUG"
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("py4j", "aiokafka", "faust.transport", "mode", "matplotlib"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))
    if args.log_level != "DEBUG":
        logging.getLogger(LIBRDKAFKA_LOGGER).addFilter(without_reported_errors)
    env = os.environ
    fallback = _local_bootstrap()
    local = fallback and not (env.get("SCALEFOLD_BOOTSTRAP_SERVERS") or args.bootstrap_servers)
    try:
        settings = Settings.from_env(
            {**_local_client_env(), **env} if local else env, bootstrap_fallback=fallback
        ).with_overrides(bootstrap_servers=args.bootstrap_servers, topic_prefix=args.topic_prefix)
    except SettingsError as error:
        print(f"scalefold: {error}", file=sys.stderr)
        return 2
    handler: Handler = args.handler
    try:
        return handler(args, Context(settings, cache_dir(env), env, _ambiguities, _forecasts))
    except BrokenPipeError:
        return _closed_pipe()
    except KeyboardInterrupt:
        return 130
    except KafkaConnectionError as error:  # a refusal is never retried: one line, and out
        print(f"scalefold: {error}", file=sys.stderr)
        if exit_on_refusal:
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(error.exit_code)
        return error.exit_code


def _closed_pipe() -> int:
    """The reader of our output went away (`scalefold replay LOG | head -1`): exit
    quietly, as a shell tool does on SIGPIPE. What is still buffered for stdout
    goes to /dev/null, so flushing it at exit raises no second BrokenPipeError
    (the recipe of Python's signal module documentation, "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_CLOSED_PIPE


if __name__ == "__main__":
    run()
