"""Wire records are frozen msgspec Structs (`rigmon.schema.Record`), and so are the agent's other records: what the rest of rigmon relies on."""

from __future__ import annotations

import dataclasses
import gc
import pickle
from dataclasses import dataclass, field
from typing import Literal

import msgspec
import pytest

import rigmon.schema as schema
from rigmon.hw.nvml.records import NvLinkData, NvmlDeviceData
from rigmon.schema import Frame, GpuReading, Record, decode, encode
from rigmon.typed import from_data, record_field_names, record_fields, to_data
from tests.tui.snapshot_apps.record_frames import load_frames

RECORD_TYPES = sorted((v for v in vars(schema).values() if isinstance(v, type) and issubclass(v, Record)
                       and v is not Record), key=lambda t: t.__name__)


def test_every_wire_record_is_a_frozen_untracked_struct() -> None:
    assert len(RECORD_TYPES) >= 38
    assert not [name for name, v in vars(schema).items() if dataclasses.is_dataclass(v)]
    frame = load_frames("v100-gpu-lost-rail-sag")[-1]
    # Records hold no cycles (see `Record`): the cycle collector never walks them.
    assert not gc.is_tracked(frame) and not gc.is_tracked(frame.readings.gpus[0])
    with pytest.raises(AttributeError):
        frame.seq = 1  # type: ignore[misc]
    for tp in RECORD_TYPES:
        assert tp.__struct_config__.frozen and not tp.__struct_config__.gc, tp.__name__


def test_hw_nvml_records_are_untracked_structs() -> None:
    data = NvmlDeviceData(index=0, lost=False, nvlinks=(NvLinkData(0, True, 1, 2, 3, 4),))
    assert not gc.is_tracked(data)
    assert msgspec.structs.replace(data, power_mw=250_000).power_mw == 250_000


def test_records_pickle_compare_hash_and_repr_as_before() -> None:
    frame = load_frames("v100-gpu-lost-rail-sag")[-1]
    copy = pickle.loads(pickle.dumps(frame))
    assert copy == frame and copy is not frame
    assert encode(copy) == encode(frame)
    gpu = frame.readings.gpus[0]
    assert hash(gpu) == hash(pickle.loads(pickle.dumps(gpu)))
    assert {gpu, msgspec.structs.replace(gpu)} == {gpu}
    assert gpu != msgspec.structs.replace(gpu, power_w=(gpu.power_w or 0.0) + 1.0)
    assert repr(gpu).startswith(f"GpuReading(index={gpu.index}, uuid={gpu.uuid!r}, ")


def test_replace_keeps_every_other_field_and_the_wire_key_order() -> None:
    frame = load_frames("v100-gpu-lost-rail-sag")[-1]
    later = msgspec.structs.replace(frame, seq=frame.seq + 1)
    assert later.readings is frame.readings and later.seq == frame.seq + 1
    assert list(msgspec.json.decode(encode(later))) == list(Frame.__struct_fields__)
    assert decode(Frame, encode(later)) == later


@dataclass(frozen=True)
class _Section:
    name: str
    mode: Literal["a", "b"] = "a"
    tags: dict[str, str] = field(default_factory=dict)


def test_record_fields_reads_structs_and_dataclasses_alike() -> None:
    gpu = {f.name: f for f in record_fields(GpuReading) or ()}
    assert list(gpu)[:3] == ["index", "uuid", "name"]
    assert gpu["index"].required and not gpu["power_w"].required and gpu["power_w"].type == float | None
    section = {f.name: (f.type, f.required) for f in record_fields(_Section) or ()}
    assert section == {"name": (str, True), "mode": (Literal["a", "b"], False), "tags": (dict[str, str], False)}
    assert record_field_names(Frame) == Frame.__struct_fields__
    assert record_fields(dict) is None and record_field_names(int) is None


def test_typed_converts_structs_both_ways() -> None:
    frame = load_frames("v100-gpu-lost-rail-sag")[-1]
    data = to_data(frame)
    assert data == msgspec.json.decode(encode(frame))
    assert from_data(Frame, data) == frame


#: Modules the agent imports at its start whose records became Structs (branch structs2): the code
#: ``@dataclass`` generates was built, compiled and run at every start.
AGENT_START_MODULES = (
    "rigmon.alarms.rules", "rigmon.alarms.memory", "rigmon.alarms.lifecycle", "rigmon.alarms.selector",
    "rigmon.alarms.rule_state", "rigmon.config.agent", "rigmon.config.alarms", "rigmon.config.gpu",
    "rigmon.config.guard", "rigmon.config.journal", "rigmon.config.loader", "rigmon.config.notify",
    "rigmon.config.probes", "rigmon.config.psu", "rigmon.config.storage", "rigmon.agent.api",
    "rigmon.agent.sampler", "rigmon.agent.ticks", "rigmon.agent.journal.runs", "rigmon.agent.alarm_state",
    "rigmon.agent.guard.state_file", "rigmon.path_resistance", "rigmon.agent.metric_names",
    "rigmon.agent.connections", "rigmon.agent.collector_threads", "rigmon.agent.journal.blocks",
    "rigmon.agent.journal.rollup", "rigmon.agent.journal.upkeep", "rigmon.notify.payload", "rigmon.series",
)


@pytest.mark.parametrize("name", AGENT_START_MODULES)
def test_agent_start_modules_define_structs_not_dataclasses(name: str) -> None:
    import importlib

    module = importlib.import_module(name)
    own = [v for v in vars(module).values() if isinstance(v, type) and v.__module__ == name]
    assert not [t.__name__ for t in own if dataclasses.is_dataclass(t)]
    structs = [t for t in own if issubclass(t, msgspec.Struct)]
    assert structs
    # Untracked by the cycle collector only where frozen (a frozen record cannot close a cycle).
    assert not [t.__name__ for t in structs if not t.__struct_config__.gc and not t.__struct_config__.frozen]


def test_config_and_rules_stay_frozen_and_untracked() -> None:
    from rigmon.alarms.rules import default_rules
    from rigmon.config import AgentConfig, load_agent_config

    config = load_agent_config("/dev/null", environ={})
    assert config == AgentConfig() and not gc.is_tracked(config)
    with pytest.raises(AttributeError):
        config.agent.interval_s = 2.0  # type: ignore[misc]
    rule = default_rules()[0]
    assert not gc.is_tracked(rule)
    assert msgspec.structs.replace(config, agent=msgspec.structs.replace(config.agent, node="n1")).agent.node == "n1"
