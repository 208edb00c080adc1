"""``npuemu bench [--quick] [--json PATH]``: npuemu's speed beside this machine's limits.

Every figure is printed next to a limit measured IN THE SAME RUN on this machine, with
``ratio = value / limit`` and, where the project has one, its target and whether it is met.
A limit is what the primitive underneath does with no npuemu code around it (a bare ring, a
bare ``np.copyto``, the allocator called in-process, bare interpreters), so the ratio is the
cost of npuemu's own code. ``npuemu bench`` runs with the copy settings of a node's
processes (``GLIBC_TUNABLES`` with glibc's non-temporal threshold, ``NPUEMU_NT_COPY_BYTES``;
``cli.cmd_bench`` re-executes itself with them), so a copy limit is the best copy this
machine makes, not the slower one a process with glibc's defaults gets. The one fixed target that is not measured (idle CPU) is labelled
"fixed target". ``--quick`` skips 256 MiB copies and takes fewer samples: ~36 s on an idle
2-vCPU VM with its 19 figures (measured; several times that while other work loads the
machine); a full run takes longer (more samples, the 256 MiB copies). ``--json PATH`` writes a list of ``{"name", "value", "unit", "limit_name",
"limit_value", "ratio"}`` records. Exit status 1 if a figure failed (targets not met are not
failures). Numbers are noisy on a shared 2-vCPU VM: read ratios, and rerun before trusting
a difference of less than ~30 % in latency figures.

The package: one module per figure family (``ring``: sync round trip; ``nodes``: idle CPU
and node start-up; ``memory``: copies and malloc+free; ``execution``; ``streams``: stream
create+destroy; ``p2p``; ``prof``: profiling on/off cost and records kept, see its
docstring), and the machinery beside them (``registry``: ``figure`` and
``Context``; ``records``: ``Record``, ``Target`` and the table; ``sampling``: timing
helpers; ``track``: cleanup; ``runner``: running the figures, ``main``). Figures run in the
order their modules are imported below, then those of ``EXTRA_FIGURE_MODULES`` that exist.

Adding a figure: one function ``f(ctx) -> list[Record]`` registered with ``@figure(key,
devices=N)`` (``devices``: it runs in a fresh interpreter with a fresh embedded node of N
devices; none: in the bench process), in a family module or in a module of its own listed
in ``EXTRA_FIGURE_MODULES`` (``from npuemu.tools.bench import Context, Record, Target,
figure``; the timing helpers ``check_ret``, ``time_each``, ``time_k``, ``calibrate``,
``sample_rates`` and ``KiB``/``MiB``/``GiB``/``format_size`` are there too). ``ctx.quick``, ``ctx.spawn`` (tracked helper processes), ``ctx.raw_name``
(tracked /dev/shm names) and ``ctx.note`` are all it needs. Records named ``<label>
<i>-><j>`` are cells of a matrix: the table prints them as one matrix block below its rows
(the JSON keeps one record per cell).

Figures (limit in brackets):

* sync round trip: median of ``runtime.get().current_link().call(Op.PING)`` [a bare
  ``shared.ring.Ring`` ping-pong over a posix_ipc segment with a spawned peer, using the
  link's and the worker's own wait strategy and constants: spin with ``sched_yield``, then
  flag + sleep on a semaphore that the other side posts only if the flag is set; and a bare
  posix_ipc semaphore ping-pong]. The three are interleaved in rounds. Target ≤ 2x ring.
* idle CPU: 8 workers attached by ``set_device``, left alone for ``worker.RECENT_S`` (its
  "recently busy" mode), then CPU of the supervisor and its children over 2 s, in % of one
  core, from ``/proc/<pid>/task/*/schedstat`` (ns; psutil ``cpu_times`` ticks at 10 ms, too
  coarse for a 1 % budget over 2 s, and is only the fallback) [fixed target: 1 %].
* H2D / D2H / D2D at 4 KiB..256 MiB: ``acl.rt.memcpy`` between a numpy buffer and
  ``acl.rt.malloc`` memory (D2D above 64 KiB is done by the worker) [``np.copyto`` between
  the same two prefaulted numpy buffers]. One untimed copy first; a sample repeats the copy
  for ~25 ms (10 ms quick); median of 7 samples (3 quick), interleaved with the limit's.
  glibc ``memmove`` (npuemu) beats ``np.copyto`` beyond the caches, so ratios > 1 happen
  there. Target for 64 MiB H2D/D2H: ≥ 0.85x. "4 KiB per call": the 4 KiB rates as one
  call's time; targets H2D and D2H ≤ 2 µs, D2D ≤ 8 µs.
* malloc+free: ``acl.rt.malloc(256, 0)`` + ``acl.rt.free`` pairs per second [``plan`` +
  ``Allocator.alloc`` + ``Allocator.free`` of ``npuemu.device.memory.allocator``, in-process].
  Target ≥ 100k pairs/s.
* execution (1 device): "async submission" is ``record_event`` calls per second from one
  thread [packing the same frame and pushing it on a bare in-process ``Ring``, popped at
  once]; target ≥ 300k/s. "stream query", "event query" and "synchronize idle stream" are
  medians of one call (no round trip: they read the shared stream/event tables) [the bare
  ring ping-pong of figure 1]; targets ≤ 2 µs and ≤ 2x. "empty kernel launch+sync" is one
  ``launch_kernel`` of an empty AI Core kernel plus ``synchronize_stream`` [the same ring].
  "copy+compute overlap": 16 MiB D2D ``memcpy_async`` on one stream and a 4 Mi-element relu
  kernel on another, sized so that each alone takes about the same time T; the time of both
  at once [the longer one alone]; target ≤ 1.2x. "copy+compute overlap, bare threads": the
  same memmove and in-place ``np.maximum`` in two threads of the bench process, samples
  taking turns with the streams' [the longer thread alone]: what the machine allows.
* node start-up: ``npuemu start --devices 8 --name bench-<pid>`` until it returns, median
  of 5 (1 quick), each followed by ``npuemu stop`` [8 bare ``python -c "import
  npuemu.shared.ring"`` started in parallel]. ``npuemu`` is the console script next to
  ``sys.executable`` (a pyenv shim adds ~45 ms). A failed start is retried under a fresh
  name and reported under NOTES. Target ≤ 1.5 s.
* card (1 device): the card's own counters, its loop CPU per task (``LOOP_WORK_CPU_NS`` over
  ``TASKS``) for a tiny op, an empty kernel and an event record queued in a burst and for
  the tiny op launched and synchronized one at a time [a ring pop + msgpack decode of one
  frame in the bench process]; target ≤ 3 µs for the tiny op. "tiny op launch+sync": one
  ``execute_v2`` Add plus ``synchronize_stream`` [a bare ring round trip sampled in turns
  with it]; target ≤ 3x. Host CPU per synchronize
  (thread CPU over wall time) for a 2 ms kernel (target ≤ 30 %) and a tiny op. See
  ``card.py``.
* card-sharing (its own one-card node, 4 helpers attached once; windows with 1, 2 and 4 of
  them submitting taken in turn, 3 rounds, medians): share ratio of 2 and 4 processes
  launching equal loads [equal shares; target ≤ 1.3] and their aggregate rate [one process
  alone; target ≥ 0.9x].
* stream create+destroy (1 device): median of one ``acl.rt.create_stream()`` +
  ``acl.rt.destroy_stream`` pair [two sync round trips (PING), the requests the pair
  needs at least]; and the same pair with ``create_stream_with_config(0,
  ACL_STREAM_PERSISTENT)`` [the default pair, same run]: descriptions of CANN's runtime quote
  about 80 % less for a persistent stream, whose resources a cache keeps for the next one; target
  ≤ 0.2x.
* capture (1 device): "replay of 1,000 tiny kernels, per task" is one
  ``acl.mdl.ri_execute_async`` of a captured chain of 1,000 one-block kernels plus
  ``synchronize_stream``, divided by 1,000 [the same chain launched eagerly plus
  ``synchronize_stream``, per task]; target ≤ 0.2x. "capture of 1,000 tasks" is
  ``ri_capture_begin``, the 1,000 launches and ``ri_capture_end`` (the card registers the
  list before it answers) [the 1,000 eager launches alone]; target ≤ 2x (see ``capture.py``).
* P2P (4 devices, peer access enabled between every two cards; the same sampling as the
  copies, 64 MiB samples 4x longer): "P2P 64 MiB" is ``acl.rt.memcpy`` kind 3 from card 1
  memory to card 0 memory with current device 0 (card 0's worker copies arena to arena)
  [``np.copyto`` 64 MiB]; target ≥ 0.9x. "P2P bidirectional" is the aggregate GB/s of 64
  MiB 0 -> 1 on a stream of card 0 and 64 MiB 1 -> 0 on a stream of card 1 at once
  (``memcpy_async`` on both, then both synchronized) [``2x np.copyto``: two of 64 MiB at
  once in two threads of the bench process, i.e. the machine doing two big copies at once,
  as the two workers do; one ``np.copyto`` would credit npuemu with the second core and
  memory channel and say nothing of its own cost]. "P2P 16 MiB i->j" is the p2pBandwidthLatencyTest
  matrix: ``acl.rt.memcpy`` of 16 MiB from card i to card j run by card i's DMA engine
  (diagonal: a copy within the card), printed as a matrix below the table
  [``np.copyto`` 16 MiB].
* C ABI (``capi``, 1 device): "C malloc+free", "C empty kernel launch+sync" and "C H2D / D2H
  64 MiB" measured by a C program built against the SDK tree [the same calls through
  ``acl.rt`` in this run; ``np.copyto`` 64 MiB]; targets ≥ 0.8x, ≤ 1.3x, ≥ 0.85x (see
  ``capi.py``).

* DVPP (``dvpp``, 1 device): "JPEG decode 1920x1080" and "VPC resize 1080p->224", one
  ``acl.media`` call plus ``synchronize_stream`` each [Pillow's YCbCr decode and
  ``cv2.resize`` of the planes on the host]; targets ≤ 2x (see ``dvpp.py``).

Cleanup: a figure child records in a track file each node and process it starts, and the
bench removes whatever is left afterwards (processes by pid, /dev/shm names by node name),
whether the figure succeeded, crashed, timed out or was interrupted (SIGTERM, Ctrl-C). Then
it checks that nothing is left and prints the result.

Sample, ``npuemu bench --quick`` on the 2-vCPU development VM (six other helpers' test
suites running; this branch has no persistent-stream cache yet, hence ~1x)::

    npuemu bench (quick, 2 CPUs): figures beside limits measured in this run; ratio = value / limit
    [1/8] sync-round-trip ... 2.1 s
    [2/8] idle-cpu ... 7.1 s
    [3/8] node-start-up ... 3.3 s
    [4/8] copy-bandwidth ... 1.8 s
    [5/8] malloc-free ... 2.1 s
    [6/8] execution ... 3.4 s
    [7/8] stream-create-destroy ... 1.2 s
    [8/8] p2p-bandwidth ... 4.8 s

    figure                               value  unit     limit (same run)             limit     ratio  target: met?
    ---------------------------------  -------  -------  -------------------------  -------  --------  ------------
    sync round trip (PING)                22.6  µs       bare ring ping-pong           18.9      1.2x  ≤ 2x: yes
    sync round trip vs sem                22.6  µs       bare sem ping-pong            5.23     4.32x  -
    idle CPU, 8 devices                  0.362  % core   fixed target                  1.00    0.362x  ≤ 1 %: yes
    node start-up, 8 devices              1.83  s        8 bare interpreters          0.905     2.03x  ≤ 1.5 s: NO
    H2D 4 KiB                            0.765  GB/s     np.copyto 4 KiB               10.0   0.0762x  -
    D2H 4 KiB                            0.719  GB/s     np.copyto 4 KiB               10.0   0.0715x  -
    D2D 4 KiB                           0.0681  GB/s     np.copyto 4 KiB               10.0  0.00678x  -
    H2D 64 KiB                            6.37  GB/s     np.copyto 64 KiB              26.6     0.24x  -
    D2H 64 KiB                            6.17  GB/s     np.copyto 64 KiB              26.6    0.232x  -
    D2D 64 KiB                           0.898  GB/s     np.copyto 64 KiB              26.6   0.0338x  -
    H2D 1 MiB                             16.9  GB/s     np.copyto 1 MiB               23.8     0.71x  -
    D2H 1 MiB                             17.3  GB/s     np.copyto 1 MiB               23.8    0.728x  -
    D2D 1 MiB                             4.22  GB/s     np.copyto 1 MiB               23.8    0.177x  -
    H2D 16 MiB                            9.78  GB/s     np.copyto 16 MiB              8.54     1.14x  -
    D2H 16 MiB                            11.1  GB/s     np.copyto 16 MiB              8.54      1.3x  -
    D2D 16 MiB                            7.23  GB/s     np.copyto 16 MiB              8.54    0.846x  -
    H2D 64 MiB                            5.49  GB/s     np.copyto 64 MiB              5.23     1.05x  ≥ 0.85x: yes
    D2H 64 MiB                            5.88  GB/s     np.copyto 64 MiB              5.23     1.12x  ≥ 0.85x: yes
    D2D 64 MiB                            5.67  GB/s     np.copyto 64 MiB              5.23     1.09x  -
    malloc+free (256 B)                 13 248  pairs/s  allocator in-process       220 676     0.06x  ≥ 100k/s: NO
    async submission (record_event)    175 772  tasks/s  bare ring push+pop         298 320    0.589x  ≥ 300k/s: NO
    stream query                          1.26  µs       bare ring ping-pong           11.4    0.111x  ≤ 2 µs: yes
    event query                           1.23  µs       bare ring ping-pong           11.4    0.108x  ≤ 2 µs: yes
    synchronize idle stream               5.01  µs       bare ring ping-pong           11.4     0.44x  ≤ 2x: yes
    empty kernel launch+sync              64.2  µs       bare ring ping-pong           11.4     5.64x  -
    copy+compute overlap                0.0495  s        longer stream alone         0.0701    0.706x  ≤ 1.2x: yes
    stream create+destroy                 56.7  µs       2 sync round trips (PING)     31.2     1.81x  -
    stream create+destroy, PERSISTENT     58.8  µs       create+destroy (default)      56.7     1.04x  ≤ 0.2x: NO
    P2P 64 MiB                            2.81  GB/s     np.copyto 64 MiB              3.30    0.852x  ≥ 0.9x: NO
    P2P bidirectional                     4.47  GB/s     2x np.copyto 64 MiB           3.74      1.2x  -

    P2P 16 MiB i->j, GB/s (row: source card i, whose DMA engine copies; column: destination card j)
             ->0   ->1   ->2   ->3
       0->  2.45  2.90  3.20  4.56
       1->  2.31  2.60  4.35  5.31
       2->  2.27  4.68  6.49  5.67
       3->  2.51  3.47  2.92  3.61
      limit (same run): np.copyto 16 MiB 3.66 GB/s; ratio 0.621x .. 1.77x

    cleanup: 8 nodes and 3 helper processes started, nothing left behind

    total runtime 25.8 s
"""

from __future__ import annotations

import importlib
import importlib.util

from npuemu.tools.bench.records import Record, Target, format_table
from npuemu.tools.bench.registry import FIGURES, Context, Figure, figure
from npuemu.tools.bench.runner import main
from npuemu.tools.bench.sampling import calibrate, check_ret, sample_rates, time_each, time_k
from npuemu.tools.sizes import GiB, KiB, MiB, format_size

FAMILIES = ("ring", "nodes", "memory", "execution", "card", "streams", "capture", "p2p", "ops",
            "models", "hccl", "prof", "memory_depth", "capi", "dvpp")
"""The figure modules of this package, in the order of the table."""
EXTRA_FIGURE_MODULES: tuple[str, ...] = ()
"""Figure modules imported after the families above if they exist (a place for figures kept
outside this package)."""


def _import_figures() -> None:
    """Register the figures: the families in table order, then the extras that exist."""
    for family in FAMILIES:
        importlib.import_module(f"npuemu.tools.bench.{family}")
    for name in EXTRA_FIGURE_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)


_import_figures()

__all__ = ["EXTRA_FIGURE_MODULES", "FAMILIES", "FIGURES", "Context", "Figure", "GiB", "KiB",
           "MiB", "Record", "Target", "calibrate", "check_ret", "figure", "format_size",
           "format_table", "main", "sample_rates", "time_each", "time_k"]
