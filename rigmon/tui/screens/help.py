"""HelpScreen: keys and what the node states mean."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
## Keys

- **↑ ↓** (or **k j**): move between nodes
- **Enter** or a click: open the node
- **Escape**: back to the cluster (**c** from anywhere)
- **a**: the alarms of every node; there **x** acknowledges the alarm under the cursor
  (its state, and once resolved its resolved time, then reads **✓**; the ack column says
  who, or the state or resolved time itself where that column is past the edge), **Enter**
  opens its node, **Tab** moves to the resolved ones;
  when a long message is cut (**…**) or columns are past the edge, the panel under the
  tables shows the alarm under the cursor in full
- **l**: the link matrix (once a node reports peer paths); there **Enter** opens the
  node of the row
- **e**: export: a snapshot bundle of the followed nodes (the last hour) and an SVG
  of the screen, in the export directory; a notification says where
- **h**: history of the node (on the cluster screen: of the node under the cursor)
- **g** / **G** on a node: hold or release its undervolt guard (the node's control token)
- **t**: next theme
- **Ctrl+P**: command palette (open a node, pick a theme)
- **?**: this help; **q**: quit

## Replay (`rigmon dash --replay FILE`)

- **Space**: play or pause; **← →**: 10 s back or ahead (**Shift**: 1 min)
- **[ ]**: slower or faster
- Clock skew is not judged in a replay: a bundle holds the nodes' own times, not when they arrived;
  nor is a node stale after its last frame (a gap between two of its frames is): past it, a bundle
  that does not date its pulls shows "recording ended HH:MM:SS" (its agent stopped, or its clock ran
  behind the others') on its row and its node screen, "ended HH:MM:SS" on its link-matrix rows,
  and its alarms are as of its last frame (faint)

## History (**h**)

A chart of the node's history from its agent's journal (`/v1/history`): the 12 V rail
(lowest minimum, mean and highest maximum, with the 11.7 V warning and 11.5 V critical
lines), each GPU's peak power (with its limit), GPU bus error rates (PCIe replays, NVLink
CRC errors and replays, where they counted), Thunderbolt/USB4 link speeds (lowest, with
the expected speed), md array throughput, path resistance and CPU. The node's warning
and critical events are numbered vertical lines, listed under the chart. A point of a long
window is a bucket of the journal: it still shows the bucket's worst value.

- **s** (**S**): next (previous) series
- **+ -**: zoom in or out (1 min to 7 days); **, .**: half a window earlier or later;
  **n**: back to now
- **Escape**: back

When the agent cannot answer (unreachable, or it keeps no journal), the chart is what this
dashboard holds of the node (its last 3600 frames, an hour at 1 Hz: the rail's minimum and mean,
GPU power, array throughput, path resistance, CPU, and the node's events), and the line above
it says so: "agent unreachable: showing the 42 minutes this dashboard holds, to 03:01:12 UTC".
A node the dashboard never heard from says "no history:" and why.
In a replay the chart is made from the recorded frames up to the time cursor.

## Alarms

A toast and the terminal bell announce each alarm that turns critical; alarms that
follow while the toast is up join it. In a small terminal (under 120x40) it is one line
at the bottom, over the keys, so that no node row is hidden. An alarm keeps the worst value it saw while it fires
and in its clear hold (the lowest rail minimum, not the latest). Alarms of one subject
that belong to one incident (a rail warning and its critical, an Xid 79 and the GPU it
lost) are one row at the worse severity.

## Colours

**Red** means something is lost or about to be: a GPU off the bus, an md array without
redundancy, a node unreachable, a peer path silent, the 12 V rail below 11.5 V (where V100-SXM2 GPUs drop off),
a critical alarm. **Amber** means act soon: the rail below 11.7 V, a link trained below its
speed (USB4, NVMe, a GPU's PCIe), NVLink or PCIe errors rising, an array lagging its twin,
a GPU drawing well over its power limit (its reading, or peaks far over a lowered limit), a
peer path degraded (p99 or loss over its limits), a collector failing, a warning. A V100's peak just over its limit for a fraction of a second
is normal and stays plain.

## Cluster screen

*rail 60s* is the lowest 12 V rail minimum of the last 60 s (each frame's ADC windows'
minimum), so a sag stays on screen after the rail recovers. The ⚠ column counts the firing
alarms of a node (its agent's and the dashboard's cluster rules: unreachable, stale, clock
skew, far from its peers), red when one of them is critical, amber when all are warnings.
A node in trouble gets a third line saying why, worst first ("GPU 3 lost 5 s after rail
11.255 V", "GPU 2 NVLink CRC +5/s, PCIe x8 of x16: check seating", "USB4 0-1 at 20 of 40
Gb/s: re-plug", "tbnet to node03 silent 12 s, HTTP up").

## Peer paths

Nodes whose agents probe their peers get a *path* column: the worst path of the last 60 s,
`silent` (red while it is; amber for the rest of the minute once it answers) or its p99
round trip (amber when degraded), with the path and peer under it. The link matrix (**l**)
has one block per path name: a row per probing node with its link speed, a column per
peer, each cell the p99 round trip and loss of the last window (green ok, amber `▲`
degraded, red silent); `·` is the node itself. A node that is not live keeps its last
figures, muted, with its state after its name (in a replay, "ended HH:MM:SS" when its
recording ended before the cursor). "HTTP up" after a silent path: the peer's
agent still answers the dashboard, so the link locked up, not the node.

## Node screen

It opens on the node's incident: *now* (what is wrong now), then its recent trouble one
step a line, oldest first, each event merged with the alarm it raised, with the cause
rigmon can see (a rail sag before a GPU loss; a link that slowed, or a drive of the array at
its warning temperature, before the array lagged).
Sources in trouble come first; those the node does not have are one "not present" line.
The PSU rail box's *rail min 60s* is the cluster row's *rail 60s*, the lowest rail minimum of
the last 60 s beside its trend; the newest ADC window's figures are *mean now* and *window*.
Under an md array each member shows its slot, `nvme0n1[0]`, or where md gives it none (a spare,
a faulty member) its device number in the superblock, `sdb2 #2` (mdstat's `[2]`): not a slot.

## GPUs, processes and the guard

The GPU table's *throttle* column (folded under the table at 80 columns) names why a GPU runs
below its top clock, as NVML reports it:

- *HW power brake* (red): the board's power-brake input is asserted; on an SXM2 server, the 12 V
  rail sagging under it (incident 1: the GPU may fall off the bus next)
- *HW slowdown* (red): the board's own emergency slowdown (power brake, over-temperature or a
  sagging supply): look at the rail and the temperatures
- *HW thermal* / *SW thermal*: the hardware limit or the driver's temperature target holds the
  clocks down: cooling
- *SW power cap*: the driver holds the board at its power limit; normal at full load
- *app clocks*: held at the application clocks (`nvidia-smi -ac`, or the undervolt guard's cap)
- *board limit*, *reliability*: the board's own limits (newer GPUs)
- *sync boost*: held to the slowest GPU of its sync-boost group; *display clocks*: held by the
  display clock setting; *idle*: nothing to run
- *other* with a mask (`other 0x1004`): a bit rigmon does not know; look it up in NVML's
  clock event reasons

Under the table, the processes on each GPU: PID, user, GPU memory, SM use, how long it has run and
its command; the line above them counts them and the GPU memory their rows hold (a row without a
figure, such as a worker hung on a lost GPU, is counted apart). A job's marks (`rigmon mark
"epoch 3 checkpoint"`) are in the incident, the events and the history chart.

The guard's line says what the undervolt guard does to the GPUs: engaged at a step (the cluster row
marks it `G1`, `G1h` held, `G1?` holding its caps because it cannot read the rail (or the GPUs), `g1` when
it may not act, `G!` caps a failed restore left; `G0h` held before it engaged; muted `Goff` released: it will
not protect a run; `dry1` in dry-run: it would cap), what it *would take* when it does not act (dry-run,
no permission), and, once an operator released it, until when it does not engage again.

## Node states

*live*: frames keep arriving. *stale*: the last frame is older than
three sampling intervals and no failure is known (a slow or stuck agent).
*unreachable*: the last attempt failed (connection refused, timed out, bad answer or another
schema version) and the data is old; the reason and the age of the last data are shown.
*refused*: the agent answered but refused the dashboard (401: a missing or wrong read token,
or 403): check the token where the reason says it was given, not the network; or refused the
request (another 4xx, such as 400 for http:// to an HTTPS agent): check the node's URL.
*connecting*: no answer yet.

When another agent answers at a node's address (its agent died and another took the port),
a notification, the row and the node's status say so: "the agent at URL now says it is node
X (was node01)"; the row's trends, alarms and held history start afresh with the new node's,
and an open history view of the node starts over on the new node's history.

Nodes in trouble are listed first. Figures the node does not report show as "—".

## Trends

Each bar of a trend stands for a stretch of time and shows its worst value: rail trends
the lowest, power and throughput trends the highest. The span the trends cover is in the
cluster's header ("trends 10m") and under each box of the node screen. The cluster rows
cover the last 10 minutes, so a sag stays in sight long after its toast.

Bars are drawn on a fixed scale where one exists: the 12 V rail from 11.0 to 12.6 V (a
healthy rail's ripple is a bar's step, a sag a cliff), GPU power from 0 to the power
limit, CPU from 0 to 100 %, a link's throughput from 0 to its speed; other throughput from
0 to its highest bar. A rail bar is amber below 11.7 V and red below 11.5 V (the alarm
thresholds). Power bars over the limit are not coloured: a V100 peaks over its limit in
every training step.
"""


class HelpScreen(ModalScreen[None]):
    """Keys and states; any of Escape, q or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "close", "Close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(HELP)

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss(None)
