"""The daemon's config: defaults, YAML + flag overrides, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config import ConfigError, DaemonConfig, decode_config, load_config


def test_empty_config_gives_the_documented_defaults() -> None:
    config = load_config(None)
    assert config == DaemonConfig()
    assert config.scheduler_name == "toposched"
    assert config.leader_election.enabled
    assert config.host_port() == ("0.0.0.0", 10251)


def test_yaml_file_and_flag_overrides_are_merged_flags_winning(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("scheduler_name: gpu\nbind_concurrency: 8\nleader_election:\n  lease_name: mine\n")
    config = load_config(path, {"bind_concurrency": 16, "leader_election.lease_namespace": "ops"})
    assert config.scheduler_name == "gpu"
    assert config.bind_concurrency == 16
    assert config.leader_election.lease_name == "mine"
    assert config.leader_election.lease_namespace == "ops"


def test_unknown_nested_key_is_named_with_its_path() -> None:
    with pytest.raises(ConfigError) as caught:
        decode_config({"leader_election": {"lease_durtion_seconds": 3}})
    assert caught.value.key == "leader_election.lease_durtion_seconds"
    assert "unknown key" in str(caught.value)


def test_out_of_range_value_names_the_key_and_the_value() -> None:
    with pytest.raises(ConfigError) as caught:
        decode_config({"bind_concurrency": 0})
    assert caught.value.key == "bind_concurrency"
    assert str(caught.value) == "bind_concurrency: expected int >= 1, got 0"


def test_wrong_type_names_the_key() -> None:
    with pytest.raises(ConfigError) as caught:
        decode_config({"timeouts": {"watch_seconds": "soon"}})
    assert caught.value.key == "timeouts.watch_seconds"
    assert "expected int" in caught.value.problem


def test_fsync_policy_must_be_one_of_the_known_modes() -> None:
    with pytest.raises(ConfigError) as caught:
        decode_config({"fsync": "sometimes"})
    assert caught.value.key == "fsync"
    assert "always, never or interval:<N>ms" in caught.value.problem


def test_fsync_interval_is_parsed_into_the_log_policy() -> None:
    assert str(decode_config({"fsync": "interval:5ms"}).fsync_policy()) == "interval:5ms"


def test_bad_address_is_rejected() -> None:
    with pytest.raises(ConfigError) as caught:
        decode_config({"address": "localhost"})
    assert caught.value.key == "address"


def test_renew_deadline_must_be_shorter_than_the_lease() -> None:
    with pytest.raises(ConfigError) as caught:
        decode_config({"leader_election": {"lease_duration_seconds": 5, "renew_deadline_seconds": 5}})
    assert caught.value.key == "leader_election.renew_deadline_seconds"


def test_a_file_that_is_not_a_mapping_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(path)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "absent.yaml")


def test_a_binary_config_file_is_one_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\xff\xfe\x00\x00")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"config file {path} is not UTF-8 text (byte 8: b'\\xff'); is it a binary?"


def test_ten_thousand_nested_lists_are_one_line_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("timeouts: " + "[" * 10_000 + "]" * 10_000 + "\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"config file {path} is not valid YAML: exceeded maximum nesting depth at "
                                        "line 1")


def test_nesting_below_the_yaml_parsers_limit_is_refused_by_depth() -> None:
    deep: object = 1
    for _ in range(500):
        deep = [deep]
    with pytest.raises(ConfigError) as caught:
        decode_config({"timeouts": deep})
    assert caught.value.key == "timeouts"
    assert "nested more than 16 levels deep" in caught.value.problem


@pytest.mark.parametrize(("text", "shown"), [(".inf", "inf"), ("-.inf", "-inf"), (".nan", "nan")])
def test_infinite_and_nan_numbers_are_refused_naming_the_key(tmp_path: Path, text: str, shown: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"event_log:\n  retention_seconds: {text}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"event_log.retention_seconds: expected a finite number, got {shown}"


def test_a_yaml_syntax_error_is_one_line_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("timeouts:\n  request_seconds: [1\nfsync: always\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "\n" not in str(caught.value)
    assert "at line 3, column 6" in str(caught.value)


def test_the_kai_node_pool_label_is_a_label_key_or_empty_for_no_pools() -> None:
    assert DaemonConfig().kai_node_pool_label == "kai.scheduler/node-pool"
    assert decode_config({"kai_node_pool_label": "run.ai/node-pool"}).kai_node_pool_label == "run.ai/node-pool"
    assert decode_config({"kai_node_pool_label": ""}).kai_node_pool_label == ""
    with pytest.raises(ConfigError) as caught:
        decode_config({"kai_node_pool_label": "pool name"})
    assert caught.value.key == "kai_node_pool_label" and "is not a node label key" in caught.value.problem
