"""A value a section refuses is named by its whole key (``psu.baud``), as a wrong type or an unknown key is."""

from __future__ import annotations

from pathlib import Path

import pytest

from rigmon.config import ConfigError, load_agent_config
from tests.config_errors import config_error


@pytest.mark.parametrize(("toml", "error"), [
    ("[psu]\nbaud = -1\n", "psu.baud must be positive (or 0: the protocol's)"),
    ("[psu]\nsag_volts = 5000\n", "psu.sag_volts must be between 0 and 1000"),
    ("[guard]\nrail_below_volts = 2\n", "guard.rail_below_volts must be between 5 and 15"),
    ("[agent]\ninterval_s = 0\n", "agent.interval_s must be between 0.01 and 3600, got 0.0"),
    ("[agent]\nmax_request_bytes = -1\n", "agent.max_request_bytes must be between 1024 and 67108864, got -1"),
    ('[agent]\nlisten = "garbage"\n', "agent.listen must be HOST:PORT, got 'garbage'"),
    ('[agent]\nlisten = "127.0.0.1:99999"\n',
     "agent.listen must be HOST:PORT with a PORT from 0 to 65535, got '127.0.0.1:99999'"),
    ("[probes]\nport = 99999\n", "probes.port must be between 0 and 65535, got 99999"),
    ("[collectors.gpu]\ninterval_s = -1\n", "collectors.gpu.interval_s must be between 0.01 and 3600, got -1.0"),
    ('[[peers]]\nname = "a"\n[[peers.paths]]\nname = "p"\naddress = "bogus"\n',
     "peers[0].paths[0].address must be an IP address, got 'bogus'"),
    ('[[notify]]\nkind = "command"\ncommand = ["./notify.sh"]\n',
     "notify[0].command: the program './notify.sh' is a relative path"),
    # Not led by a key of the section: as the section said it.
    ('[[notify]]\nkind = "ntfy"\n', "notify[0]: a ntfy notifier needs url = \"http(s)://...\", got ''"),
    # The decoder's own errors were named so already.
    ("[psu]\nport = 5\n", "psu.port: expected a string, got 5"),
    ('[psu]\nportt = "/dev/ttyUSB0"\n', "psu.portt: unknown key (known: "),
    ('[psu]\nprotocol = "text"\nchannels = { x = "0" }\n',
     "psu.channels.x: channel names start with v (volts) or i (amps)"),
])
def test_a_bad_value_names_the_file_and_the_whole_key(tmp_path: Path, toml: str, error: str) -> None:
    path, message = config_error(tmp_path, toml)
    assert message.startswith(f"{path}: {error}"), message


def test_a_bad_value_from_the_environment_names_the_variable_and_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        load_agent_config(None, environ={"RIGMON_AGENT_LISTEN": "garbage"})
    assert str(info.value) == "environment RIGMON_AGENT_LISTEN: agent.listen must be HOST:PORT, got 'garbage'"


@pytest.mark.parametrize(("toml", "error"), [
    # A typo'd key: the sketch's 12030 mV read 12030 V, every line was dropped as nonsense and the ADC
    # was called silent, the mistake named nowhere.
    ('[psu]\nport = "/dev/x"\nprotocol = "text"\n[psu.scale]\nV = 0.001\n',
     "psu.scale.V: no channel V in [psu.channels] (its channels: v)"),
    ('[psu]\nport = "/dev/x"\nprotocol = "text"\nchannels = { v = "0", i = "1" }\nscale = { vpsu = 0.001 }\n',
     "psu.scale.vpsu: no channel vpsu in [psu.channels] (its channels: i, v)"),
    # Read by no other protocol: silently ignored before.
    ('[psu]\nport = "/dev/x"\nscale = { v = 0.001 }\n', 'psu.scale: [psu.scale] is read only with protocol = "text"'),
    # The rail was never watched: psu_adc_channel_missing said so only once lines came.
    ('[psu]\nport = "/dev/x"\nprotocol = "text"\nchannels = { vbus = "Bus Voltage" }\n',
     "psu.primary: the channel 'v' is not in [psu.channels] (its channels: vbus)"),
])
def test_a_psu_scale_or_primary_naming_no_channel_is_refused(tmp_path: Path, toml: str, error: str) -> None:
    path, message = config_error(tmp_path, toml)
    assert message.startswith(f"{path}: {error}"), message


@pytest.mark.parametrize(("toml", "error"), [
    # Matched against CHIP/inN only: the 12 V input went on reading its pin's 1.8 V, the setting ignored.
    ('[psu.hwmon]\nscale = { in4 = 6.6 }\n', "psu.hwmon.scale.in4: a key is CHIP/inN as hwmon names the input"),
    ('[psu.hwmon]\nscale = { "nct6779/temp1" = 6.6 }\n', "psu.hwmon.scale.nct6779/temp1: a key is CHIP/inN"),
    ('[psu.hwmon]\nscale = { "nct6779/in4" = 0 }\n', "psu.hwmon.scale.nct6779/in4 must be a positive number"),
    ('[psu.hwmon]\nscale = { "nct6779/in4" = -6.6 }\n', "psu.hwmon.scale.nct6779/in4 must be a positive number"),
])
def test_a_hwmon_scale_hwmon_never_names_is_refused(tmp_path: Path, toml: str, error: str) -> None:
    path, message = config_error(tmp_path, toml)
    assert message.startswith(f"{path}: {error}"), message


def test_text_channels_with_their_scale_and_primary_load(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text('[psu]\nport = "/dev/x"\nprotocol = "text"\nprimary = "vbus"\n'
                    'channels = { vbus = "Bus Voltage", i = "Current" }\nscale = { vbus = 0.001 }\n')
    assert load_agent_config(path, environ={}).psu.scale == {"vbus": 0.001}
    path.write_text('[psu.hwmon]\nscale = { "nct6779/in4" = 6.6, "it8686/in12" = 5 }\n')
    assert load_agent_config(path, environ={}).psu.hwmon.scale == {"nct6779/in4": 6.6, "it8686/in12": 5.0}
