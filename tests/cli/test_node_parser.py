"""`python -m raftkafka node` builds only the node command's parser: a restarting node does not
import the client tools (CPU that costs seconds of wall time on a loaded host)."""
import subprocess
import sys

from raftkafka.cli.main import NODE_ONLY, build_parser

ARGS = ["node", "--node-id", "1", "--roles", "broker,controller", "--log-dir", "/tmp/x",
        "--set", "broker.session.timeout.ms=9000"]


def test_the_node_only_parser_reads_node_arguments_as_the_full_one_does():
    only, full = build_parser(NODE_ONLY).parse_args(ARGS), build_parser().parse_args(ARGS)
    assert {k: v for k, v in vars(only).items() if k != "run"} == {
        k: v for k, v in vars(full).items() if k != "run" and k in vars(only)}
    assert only.run is full.run


def test_starting_a_node_imports_no_client_tool():
    code = ("import sys; from raftkafka.cli.main import NODE_ONLY, build_parser; "
            f"build_parser(NODE_ONLY).parse_args({ARGS!r}); "
            "print(sorted(m for m in sys.modules if m.startswith(('raftkafka.client', 'raftkafka.cli.topics'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
