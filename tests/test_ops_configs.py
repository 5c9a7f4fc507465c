"""ops/: the example configs parse and agree with each other, the documented commands work, and every
metric named in the dashboard, the alerts and the docs exists in metrics.registry.CATALOGUE."""
from __future__ import annotations

import configparser
import json
import pathlib
import re
import shlex

import pytest

from raftkafka.cli.main import build_parser, main
from raftkafka.node.config import load_config, read_toml
from storage.meta_properties import check_data_dir
from storage.env import RealFileSystem
from metrics.registry import CATALOGUE

OPS = pathlib.Path(__file__).resolve().parents[1] / "ops"
CONFIGS = sorted((OPS / "config").rglob("*.toml"))
CATALOGUE_KINDS = {d.name: d.kind for d in CATALOGUE}
METRIC_TOKEN = re.compile(r"\braftkafka_[a-z0-9_]+")
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def _config(path: pathlib.Path):
    return load_config(read_toml(str(path)))


def _metric_names(text: str) -> set[str]:
    """Catalogue names behind every raftkafka_* token (histogram series map to their family)."""
    out = set()
    for token in METRIC_TOKEN.findall(text):
        base = re.sub(r"_(bucket|sum|count)$", "", token)
        out.add(base if CATALOGUE_KINDS.get(base) == "histogram" else token)
    return out


# ------------------------------------------------------------------------ node configs


def test_the_expected_example_configs_exist():
    names = sorted(str(p.relative_to(OPS / "config")) for p in CONFIGS)
    assert names == [f"combined/node-{n}.toml" for n in (1, 2, 3)] + [
        f"split/broker-{n}.toml" for n in (1, 2, 3)] + [f"split/controller-{n}.toml" for n in (1, 2, 3)]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_example_config_parses_into_a_node_config(path):
    config = _config(path)
    assert config.log_dirs and config.voters
    if "controller" in config.roles:
        assert config.controller_listener is not None
    if "broker" in config.roles:
        assert any(l.name not in config.controller_listener_names for l in config.listeners)


def _layout(name: str) -> dict[str, object]:
    return {p.stem: _config(p) for p in CONFIGS if p.parent.name == name}


def test_combined_layout_is_three_voters_that_are_also_brokers():
    nodes = _layout("combined")
    voters = {tuple(c.voters) for c in nodes.values()}
    assert len(voters) == 1, "every node must name the same controller.quorum.voters"
    (voter_set,) = voters
    assert sorted(c.node_id for c in nodes.values()) == sorted(v.node_id for v in voter_set) == [1, 2, 3]
    for name, c in nodes.items():
        assert c.roles == ("broker", "controller")
        me = next(v for v in voter_set if v.node_id == c.node_id)
        assert me.host == f"raftkafka-{c.node_id}" and name == f"node-{c.node_id}"
        assert c.controller_listener.port == me.port


def test_split_layout_is_three_controllers_and_three_observer_brokers():
    nodes = _layout("split")
    assert len({tuple(c.voters) for c in nodes.values()}) == 1
    controllers = {n: c for n, c in nodes.items() if n.startswith("controller")}
    brokers = {n: c for n, c in nodes.items() if n.startswith("broker")}
    voter_ids = sorted(v.node_id for v in next(iter(nodes.values())).voters)
    assert sorted(c.node_id for c in controllers.values()) == voter_ids == [1, 2, 3]
    assert sorted(c.node_id for c in brokers.values()) == [4, 5, 6]
    assert all(c.roles == ("controller",) for c in controllers.values())
    assert all(c.roles == ("broker",) and c.controller_listener is None for c in brokers.values())
    for c in controllers.values():
        me = next(v for v in c.voters if v.node_id == c.node_id)
        assert c.controller_listener.port == me.port and me.host == f"controller-{c.node_id}"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_documented_format_command_formats_that_node(path, tmp_path, capsys):
    """`python -m raftkafka format --config FILE --cluster-id ID` as the file's comment says
    (with the data dir redirected here), then the node's own start-up check accepts it."""
    documented = re.search(r"python -m raftkafka (format --config \S+ --cluster-id) <id>", path.read_text())
    assert documented, "the config should say how to format its node"
    args = shlex.split(documented.group(1)) + [CLUSTER_ID]
    args[args.index("--config") + 1] = str(path)
    with pytest.raises(SystemExit) as exit:
        main(args + ["--log-dirs", str(tmp_path / "data")])
    assert exit.value.code == 0, capsys.readouterr().err
    config = _config(path)
    meta, voters = check_data_dir(RealFileSystem(), str(tmp_path / "data"), node_id=config.node_id)
    assert meta.cluster_id == CLUSTER_ID
    assert [(v.node_id, v.host, v.port) for v in voters] == [(v.node_id, v.host, v.port) for v in config.voters]


# ------------------------------------------------------------------------ systemd unit


def test_systemd_unit_runs_the_node_command_with_a_long_enough_stop_timeout():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read_string((OPS / "systemd" / "raftkafka@.service").read_text())
    service = unit["Service"]
    command = shlex.split(service["ExecStart"])
    assert command[1:3] == ["-m", "raftkafka"]
    args = build_parser().parse_args(command[3:])
    assert args.command == "node" and args.config == "/etc/raftkafka/%i.toml"
    assert service["Restart"] == "on-failure" and service["KillSignal"] == "SIGTERM"
    assert int(service["LimitNOFILE"]) >= 100_000
    # Controlled shutdown (10 s) plus Raft resignation (1 s) must fit before SIGKILL.
    assert int(service["TimeoutStopSec"]) > 11
    assert unit["Install"]["WantedBy"] == "multi-user.target"


# ------------------------------------------------------------------------ dashboard, alerts, docs


def _dashboard() -> dict:
    return json.loads((OPS / "grafana" / "raftkafka-dashboard.json").read_text())


def test_dashboard_is_well_formed_grafana_json():
    dash = _dashboard()
    assert dash["uid"] and dash["title"] and isinstance(dash["schemaVersion"], int)
    assert {v["name"] for v in dash["templating"]["list"]} >= {"datasource"}
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for p in dash["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0
        if p["type"] == "row":
            continue
        assert p["targets"], p["title"]
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"])
        for t in p["targets"]:
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]
            assert METRIC_TOKEN.search(t["expr"]), t["expr"]


def _dashboard_exprs() -> str:
    return "\n".join(t["expr"] for p in _dashboard()["panels"] for t in p.get("targets", []))


def test_every_metric_in_the_dashboard_exists_in_the_catalogue():
    used = _metric_names(_dashboard_exprs())
    assert used and used <= set(CATALOGUE_KINDS), used - set(CATALOGUE_KINDS)


def test_the_dashboard_graphs_what_issue_9_asks_for():
    exprs = _dashboard_exprs()
    for needed in [
        "raftkafka_broker_topic_bytes_in_total", "raftkafka_broker_topic_bytes_out_total",
        "raftkafka_broker_topic_messages_in_total", "raftkafka_request_total",
        "histogram_quantile(0.99, sum by (api, le) (rate(raftkafka_request_latency_seconds_bucket",
        "raftkafka_under_replicated_partitions", "raftkafka_offline_partitions",
        "raftkafka_isr_shrinks_total", "raftkafka_isr_expands_total", "raftkafka_active_controller",
        "raftkafka_raft_leader_id", "raftkafka_raft_epoch", "raftkafka_raft_high_watermark",
        "raftkafka_raft_follower_lag", "raftkafka_consumer_group_lag",
    ]:
        assert needed in exprs, needed
    # Counters are graphed as rates, never as raw totals.
    for token in set(METRIC_TOKEN.findall(exprs)):
        if token.endswith("_total"):
            assert re.search(rf"rate\({token}\b", exprs), token


def test_alert_rules_use_catalogue_metrics_and_each_has_a_runbook_section():
    alerts = (OPS / "prometheus" / "alerts.yml").read_text()
    assert _metric_names(alerts) <= set(CATALOGUE_KINDS), _metric_names(alerts) - set(CATALOGUE_KINDS)
    names = re.findall(r"- alert: (\w+)", alerts)
    anchors = re.findall(r"runbook: ops/runbook\.md#(\S+)", alerts)
    assert len(names) == len(anchors) >= 8
    headings = {h.strip().lower() for h in re.findall(r"^#+ (.+)$", (OPS / "runbook.md").read_text(), re.M)}
    for name, anchor in zip(names, anchors):
        assert anchor == name.lower() and name.lower() in headings, name


def test_prometheus_scrapes_the_hosts_of_the_example_configs():
    text = (OPS / "prometheus" / "prometheus.yml").read_text()
    assert "rule_files:" in text and "- alerts.yml" in text
    targets = re.findall(r'"([a-z0-9-]+):(\d+)"', text)
    hosts = {h for h, _ in targets}
    for layout in ("combined", "split"):
        for c in _layout(layout).values():
            assert {v.host for v in c.voters} <= hosts
    assert {f"broker-{n}" for n in (1, 2, 3)} <= hosts
    assert {port for _, port in targets} == {"9464"}


def test_docs_name_only_real_metrics_and_document_every_one():
    readme = (OPS / "README.md").read_text()
    runbook = (OPS / "runbook.md").read_text()
    assert _metric_names(readme + runbook) <= set(CATALOGUE_KINDS)
    table = dict(re.findall(r"^\| `(raftkafka_\w+)` \| (\w+) \|", readme, re.M))
    assert table == CATALOGUE_KINDS


def test_docs_use_only_commands_the_cli_has():
    parser = build_parser()
    subcommands = set(parser._subparsers._group_actions[0].choices)
    for doc in ("README.md", "runbook.md"):
        text = (OPS / doc).read_text()
        used = set(re.findall(r"python -m raftkafka ([\w-]+)", text))
        assert used and used <= subcommands, (doc, used - subcommands)
        for sub in re.findall(r"python -m raftkafka quorum (\w+)", text):
            assert sub == "describe"
