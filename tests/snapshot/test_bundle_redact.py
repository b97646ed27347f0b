"""Bundles of older agents' frames: the secrets on a GPU process's command line are redacted on the way in."""

from __future__ import annotations

import gzip
import tarfile
from pathlib import Path

from rigmon.schema import Event, Frame, GpuProcessReading, History, encode
from rigmon.schema.frame import Readings
from rigmon.snapshot.bundle import NodePart, frames_gzip
from rigmon.snapshot.command import write_snapshot
from rigmon.snapshot.redact_frames import redact_frames_gz

SECRET = "hf_" + "Zq8Lm2Rt6Yw1Ux4Ip7Oa3Sd5Fg9Hj0Kk"
#: As an agent before the redaction wrote it: the whole command line.
OLD_CMDLINE = f'env "WANDB_API_KEY=w4ndb" /opt/conda/bin/python3 train.py --hf-token={SECRET} --tokenizer gpt2'
OLD_COMMAND = 'env "WANDB_API_KEY=w4ndb"'
SECRETS = (SECRET, "w4ndb")


def _frame(seq: int, cmdline: str, command: str) -> Frame:
    proc = GpuProcessReading(pid=4242, vendor="nvidia", gpu_index=0, command=command, cmdline=cmdline)
    event = Event(id=f"r-{seq}", at=1000.0 + seq, kind="gpu_process_exited", severity="warning", subject="gpu:0",
                  message=f"{command} (pid 4242) exited (exit code 1) on GPU 0", data={"pid": 4242, "command": command})
    return Frame(schema=1, node="n1", run_id="r", seq=seq, taken_at=1000.0 + seq, agent_start=999.0, collectors={},
                 readings=Readings(gpu_processes=(proc,)), events=(event,))


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


def test_a_bundle_of_an_older_agents_frames_holds_no_command_line_secret(tmp_path: Path) -> None:
    # Before: frames.jsonl.gz went into the bundle as the journal held it, with the token in every frame;
    # latest.json, events.jsonl and REPORT.md likewise (the short command "env WANDB_API_KEY=..." in the messages).
    old = [_frame(i, OLD_CMDLINE, OLD_COMMAND) for i in range(3)]
    part = NodePart(node="n1", source="journal", latest=old[-1], frames_gz=frames_gzip(old[:2]) + frames_gzip(old[2:]),
                    frame_count=3, history=History(schema=1, node="n1", from_at=1000.0, to_at=1003.0, tier="frames",
                                                   step_s=1.0, series={},
                                                   events=tuple(e for f in old for e in f.events)))
    members = _members(write_snapshot([part], 60.0, tmp_path / "b.tar.gz"))
    frames = gzip.decompress(members["nodes/n1/frames.jsonl.gz"])
    for name, data in [("frames", frames), *((n, members[n]) for n in ("nodes/n1/latest.json", "nodes/n1/events.jsonl", "REPORT.md"))]:
        assert [s for s in SECRETS if s.encode() in data] == [], name
    # The rest of the command stays readable, and the frames still decode.
    assert b"--hf-token=<redacted> --tokenizer gpt2" in frames
    assert b'env \\"WANDB_API_KEY=<redacted>\\" (pid 4242) exited' in members["nodes/n1/events.jsonl"]
    assert b"(pid 4242) exited (exit code 1)" in members["REPORT.md"]
    assert frames.count(b"\n") == 3


def test_frames_with_nothing_to_redact_pass_byte_for_byte_and_damage_is_kept() -> None:
    new = frames_gzip([_frame(1, "python3 train.py --hf-token=<redacted>", "python3 train.py")])
    assert redact_frames_gz(new) is not None and redact_frames_gz(new) == new
    old = frames_gzip([_frame(2, OLD_CMDLINE, OLD_COMMAND)])
    cut = old[: len(old) // 2]
    out = redact_frames_gz(new + old + cut)
    # The first member as it was, the second redacted, the cut one after them kept (the reader says it is damaged).
    assert out.startswith(new) and out.endswith(cut)
    redone = gzip.decompress(out[len(new):-len(cut)])
    assert SECRET.encode() not in redone and encode(_frame(2, "x", "y"))[:20] == redone[:20]
