"""NCCL's device memory per rank for one communicator, derived from NCCL's own source.

Pure data and pure functions (no host access); the memory model and FC406 use them.

Read in NVIDIA/nccl at tag ``v2.26.2-1`` (the NCCL torch 2.7.1 pins, so vLLM 0.10.0 and
0.10.1.1 run it); the constants below were checked unchanged in ``v2.27.3-1`` (torch 2.8.0),
``v2.27.5-1`` (torch 2.9.0) and 2.30.7 (master, makefiles/version.mk; torch 2.14.0's pin,
vLLM 0.33.0) except where a note says otherwise. Which NCCL each torch pins is the torch
wheel's ``Requires-Dist: nvidia-nccl-cu12==…`` (``NCCL_BY_TORCH``).

What a communicator allocates on the GPU, by source file:

- **Channels** (src/graph/search.cc ``ncclTopoCompute``, src/graph/connect.cc
  ``ncclTopoPostset``, src/init.cc ``initTransportsRank``). The ring search starts at the
  first speed of the architecture's ``speedArrayIntra`` (``sm90SpeedArrayIntra`` for
  cc >= 9.0, ``sm100SpeedArrayIntra`` for cc >= 10.0) not above the GPU's best path and
  finds as many channels of that speed as the links carry (``followPath`` subtracts the
  speed from each link a channel crosses), at most ``MAXCHANNELS/2``; pass 1 lowers the
  speed while ``next / best > .49`` and keeps the largest ``channels x speed`` (a tie keeps
  the first); ``ncclTopoDupChannels`` doubles the channels (halving the speed) when the
  speed is >= 25 and not (cc > 8.0, speed < 50 and more than 4 channels); pass 2 tries
  higher speeds with at least that many channels. The tree search must find as many
  (``treeGraph->minChannels = maxChannels = ringGraph->nChannels``); the communicator
  takes the smaller, and ``ncclTopoPostset`` doubles it again ("Duplication should be
  complete now": ``min(MAXCHANNELS, 2 x nChannels)``), then raises it to the NVLS channel
  count when that is larger.
- **Topology** (src/graph/topo.cc ``ncclTopoAddNvLinks``): every NVLink to an NVSwitch goes
  to one ``NVS`` node, the links' bandwidth summed: ``links x ncclTopoNVLinkBw(cc)``
  (src/graph/topo.h: SM80 20.0, SM90 20.6, SM100 40.0 in 2.26 / 40.1 from 2.27.5 GB/s per
  link). A full NVSwitch node is a star: every channel takes its speed once from each GPU's
  up link and once from its down link, so a speed ``s`` carries ``floor(bw / s)`` channels.
- **Connections at init** (src/init.cc): ``comm->runtimeConn = comm->cuMemSupport &&
  ncclParamRuntimeConnect()`` (NCCL_RUNTIME_CONNECT defaults to 1). Without cuMem
  (NCCL_CUMEM_ENABLE=0) every ring (src/transport/generic.cc ``ncclTransportRingConnect``:
  recv from ``ring.prev``, send to ``ring.next``) and every tree (``ncclTransportTreeConnect``:
  send and recv to ``tree.up`` and each ``tree.down``) of every channel, and the NVLS buffers
  (``ncclNvlsBufferSetup``), are set up in ``ncclCommInitRank``; with cuMem, only when a
  collective first needs that algorithm. A connection is per (channel, peer, direction)
  (src/transport.cc ``ncclTransportP2pConnect`` skips one already connected), so a ring and
  a tree to the same peer share it.
- **Trees on one node** (connect.cc ``ncclTopoPreset``): a chain in the tree graph's order
  (``tree.up = intra[i-1]``, ``tree.down[0] = intra[i+1]``); ``connectTrees`` changes
  nothing with one node (``ncclGetDtree`` of one node). On an NVSwitch node the first
  channel is tried in PCI order (search.cc ``FORCED_ORDER_PCI``) and later ones replay it,
  so the ring and the chain run 0 -> 1 -> ... -> n-1: a middle rank sends to and receives
  from both neighbours (2 + 2 connections), the chain's head (rank 0) sends to 1 and receives
  from 1 and n-1 (1 + 2), its tail sends to n-2 and 0 and receives from n-2 (2 + 1).
- **A P2P connection's buffers** (src/transport/p2p.cc ``p2pSendSetup`` / ``p2pRecvSetup``):
  the sender allocates ``sizeof(ncclSendMem)`` (4 KiB, ``MEM_ALIGN``) plus the SIMPLE buffer
  when P2P read is on; the receiver ``sizeof(ncclRecvMem)`` plus LL, LL128 and (without
  read) SIMPLE; each rounded up to ``CUDA_IPC_MIN`` (2 MiB, src/include/comm.h). Sizes
  (src/init.cc ``DEFAULT_*BUFFSIZE``, src/include/device.h): LL ``8 x 512 x NCCL_STEPS (8) x
  16`` = 512 KiB, LL128 ``120 x 640 x 8 x 8`` = 4,915,200 B, SIMPLE 4 MiB. P2P read is on
  only between two cc 8.0 GPUs over NVLink (src/graph/paths.cc ``ncclTopoCheckP2p``): send
  2 MiB + receive 10 MiB without read, 6 + 6 MiB with it — 12 MiB a connection either way.
- **NVLS** (src/transport/nvls.cc): ``ncclNvlsInit`` turns it on for more than two GPUs when
  the driver reports ``CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED`` (NCCL_NVLS_ENABLE defaults to
  2: ask the driver) — a property of the node (driver, fabric manager), not of NCCL, and
  independent of NCCL_CUMEM_ENABLE; ``nvlsChannels`` 16 on cc 9.x, 32 on cc >= 10.0;
  ``ncclNvlsBufferSetup`` allocates ``nChannels x 2 x (NVLS_CHUNKSIZE 128 KiB x NCCL_STEPS)
  x nHeads`` on each GPU, ``nHeads`` the NVLS graph's channels — on one node every GPU
  (search.cc forces ``minChannels = maxChannels = ngpus``; each channel takes its speed from
  every GPU and twice from its head, so ``(n + 1) x speed`` must fit a GPU's links) — plus
  64 B of credits per channel and head (rounded up to the driver's allocation granularity,
  not counted here).

Confirmation in public logs (the derivation was not fitted to them): an HGX A100 node
prints ``Channel 23/24 : 0 1 2 3 4 5 6 7``, ``via P2P/IPC/read`` and the chain trees
``1/-1/-1->0->-1`` (NVIDIA/nccl-tests issue 100; derived: 24 channels, read on cc 8.0); an
8 x H800 node (8 NVLinks a GPU) ``16 coll channels`` (NVIDIA/nccl issue 892; derived: 16);
8 x H100 on AWS p5.48xlarge, one node of 8 ranks, ``24 coll channels, 24 collnet channels,
16 nvls channels`` (a public benchmark log, search-index file id 60568325604; derived: 24 and
16). And vLLM 0.10.0's own per-rank KV budgets on 8 x H100 (tests/fixtures/memory points 15
and 16: 35.65 / 35.74 / 36.12 and 55.62 / 55.71 / 56.08 GiB) differ by 0.09 and 0.47 GiB, what
two such communicators' middle, head and tail ranks differ by (2 x 24 x 2 MiB = 0.094 GiB and
2 x 24 x 10 MiB = 0.469 GiB).

Not derived (ranges, low end used for a stop): PCIe-only nodes (whether P2P or the SHM
transport — buffers in host memory, src/transport/shm.cc — is used depends on the PCIe
switches, ACS and the CPU: src/graph/paths.cc ``p2pLevel``), NVLink meshes without a switch
beyond two GPUs. More than one node: the network transport's buffers sit on the GPU only with
GPUDirect RDMA (src/transport/net.cc), a range from 0 (``multinode_communicator_bytes``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MiB = 1 << 20

# ---- src/include/device.h, src/init.cc, src/include/comm.h (v2.26.2-1) ----------------
NCCL_STEPS = 8
#: DEFAULT_LL_BUFFSIZE = NCCL_LL_LINES_PER_THREAD (8) x NCCL_LL_MAX_NTHREADS (512) x
#: NCCL_STEPS x sizeof(union ncclLLFifoLine) (16)
LL_BUFFSIZE = 8 * 512 * NCCL_STEPS * 16
#: DEFAULT_LL128_BUFFSIZE = NCCL_LL128_ELEMS_PER_THREAD (120) x NCCL_LL128_MAX_NTHREADS (640)
#: x NCCL_STEPS x sizeof(uint64_t)
LL128_BUFFSIZE = 120 * 640 * NCCL_STEPS * 8
#: DEFAULT_BUFFSIZE (1 << 22)
SIMPLE_BUFFSIZE = 1 << 22
#: sizeof(ncclSendMem) / sizeof(ncclRecvMem): unions padded to MEM_ALIGN
CONN_HEADER = 4096
#: p2p.cc rounds each side's allocation up to CUDA_IPC_MIN
CUDA_IPC_MIN = 2 * MiB
MAXCHANNELS = 64
#: src/transport/nvls.cc NVLS_NCHANNELS_SM90 / NVLS_NCHANNELS_SM100, NVLS_CHUNKSIZE
NVLS_CHANNELS_SM90 = 16
NVLS_CHANNELS_SM100 = 32
NVLS_CHUNKSIZE = 128 * 1024
NVLS_CREDIT = 64  # ncclNvlsSetup: memSize per channel and head
#: NCCL before 2.22 (read at tag v2.21.5-1, src/transport/nvls.cc ``ncclNvlsSetup``) sizes the NVLS
#: buffers by the communicator's channels (``int nChannels = comm->nChannels``, not nvlsChannels)
#: and gives each a ``NVLS_MEM_ALIGN_SIZE`` (1 << 21) head/tail block beside the chunk x steps
#: buffer: ``nChannels x 2 x (NVLS_CHUNKSIZE x NCCL_STEPS + 2 MiB) x nHeads``, one cuMemCreate
#: (nvlsGroupBindMem). v2.22.3-1 moved to ``nvlsChannels x 2 x chunk x steps x nHeads`` plus
#: 16-64 B of credits (read at v2.22.3-1, v2.23.4-1, v2.24.3-1, v2.26.2-1).
NVLS_PER_CHANNEL_UNTIL = (2, 22)
NVLS_MEM_ALIGN_SIZE = 2 * MiB

# ---- src/graph/search.cc, src/graph/topo.h ------------------------------------------------
SPEED_INTRA = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
SPEED_INTRA_SM90 = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
#: sm100SpeedArrayIntra as of 2.26.2; 2.27 appends 18.0 and 2.30 inserts 45.0 (below the
#: speeds a B200's 18 links settle on, so the channel count is the same)
SPEED_INTRA_SM100 = (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0)
#: ncclTopoNVLinkBw: GB/s per NVLink by compute capability (SM100 40.0 in 2.26, 40.1 later)
NVLINK_BW = {100: 40.0, 90: 20.6, 86: 12.0, 80: 20.0, 70: 20.0, 60: 18.0}

#: torch release -> the NCCL its Linux x86_64 wheel pins (``Requires-Dist:
#: nvidia-nccl-cu12==…``, read from the wheels' metadata; 2.14.0 pins nvidia-nccl-cu13 2.30.7)
#: 2.5.1 and 2.6.0 resolve nvidia-nccl-cu12==2.21.5 in public install logs (pip freeze beside
#: torch==2.5.1, search-index file id 17273122638; uv's resolution of torch==2.6.0+cu124, file
#: 54172393098), and vLLM 0.8.3 (torch 2.6.0) logs "vLLM is using nccl==2.21.5" / "NCCL version
#: 2.21.5+cuda12.4" (file 17822999525): not read from those wheels' metadata
NCCL_BY_TORCH = {
    "2.5.1": "2.21.5",
    "2.6.0": "2.21.5",
    "2.7.1": "2.26.2",
    "2.8.0": "2.27.3",
    "2.9.0": "2.27.5",
    "2.14.0": "2.30.7",
}


def version_of(text: str | None) -> tuple[int, ...] | None:
    """ "2.21.5" -> (2, 21, 5); None for None or a spelling that is not dotted numbers."""
    if not text:
        return None
    try:
        return tuple(int(p) for p in text.split("."))
    except ValueError:
        return None


def _cc(compute_capability: str | int | None) -> int | None:
    """ "9.0" -> 90 (an int is taken as already in that form; None when unknown)."""
    if compute_capability is None:
        return None
    if isinstance(compute_capability, int):
        return compute_capability
    try:
        major, _, minor = str(compute_capability).partition(".")
        return int(major) * 10 + int(minor or 0)
    except ValueError:
        return None


def nvlink_bw(cc: int) -> float:
    """GB/s per NVLink (topo.h ``ncclTopoNVLinkBw``)."""
    if cc == 86:
        return NVLINK_BW[86]
    for floor_cc in (100, 90, 80, 70, 60):
        if cc >= floor_cc:
            return NVLINK_BW[floor_cc]
    return NVLINK_BW[80]  # topo.h's fallback


def speeds(cc: int) -> tuple[float, ...]:
    """The intra-node speed array ncclTopoCompute walks for the node's smallest cc."""
    if cc >= 100:
        return SPEED_INTRA_SM100
    if cc >= 90:
        return SPEED_INTRA_SM90
    return SPEED_INTRA


def _fit(bw: float, speed: float) -> int:
    """Channels of ``speed`` a star link of ``bw`` carries (followPath subtracts, rounded to
    1/1000 — SUB_ROUND)."""
    return round(bw * 1000) // round(speed * 1000)


def _search(bw: float, cc: int, ngpus: int, *, ring: bool, min_ch: int, max_ch: int) -> tuple[int, float]:
    """``ncclTopoCompute`` for one pattern on a star of per-GPU bandwidth ``bw`` (one node,
    no NIC): (channels, speed) after pass 1, the duplication and pass 2."""
    sp = speeds(cc)
    # the start speed: not above the best path, nor minChannels x speed above totalBw
    # (scaled by ngpus / (ngpus - 1) for every pattern but the ring)
    total = bw if ring else bw * ngpus / max(1, ngpus - 1)
    i = 0
    while (sp[i] > bw or sp[i] * min_ch > total) and i < len(sp) - 1:
        i += 1
    best: tuple[int, float] | None = None
    while True:  # pass 1
        c = min(max_ch, _fit(bw, sp[i]))
        if c >= min_ch and (best is None or c * sp[i] > best[0] * best[1]):
            best = (c, sp[i])
        if best is not None and (best[0] == max_ch or best[0] * best[1] >= bw):
            break
        if i < len(sp) - 1 and (best is None or sp[i + 1] / best[1] > 0.49):
            i += 1
            continue
        break
    if best is None:
        return 0, 0.0
    n, s = best
    # ncclTopoDupChannels
    if s >= 25.0 and not (cc > 80 and s < 50.0 and n > 4):
        dup = min(2 * n, max_ch)
        s = s / math.ceil(dup / n)
        n = dup
    # pass 2: a higher speed must keep at least n channels and carry more
    j = next((k for k, v in enumerate(sp) if v <= s), len(sp) - 1)
    while j > 0:
        j -= 1
        c = min(max_ch, _fit(bw, sp[j]))
        if c >= n and c * sp[j] > n * s:
            n, s = c, sp[j]
        elif not ring:
            break  # trees raise only bwIntra, and stop at the first failure
    return n, s


def nvswitch_channels(compute_capability: str | int | None, nvlinks: int, ngpus: int = 8) -> int | None:
    """Ring/tree channels of a communicator whose GPUs all sit on one NVSwitch node (or are
    two GPUs joined only to each other by ``nvlinks`` links): the search's channels doubled by
    ``ncclTopoPostset``, at most MAXCHANNELS. None when the compute capability is unknown."""
    cc = _cc(compute_capability)
    if cc is None or nvlinks <= 0:
        return None
    bw = nvlinks * nvlink_bw(cc)
    ring, _ = _search(bw, cc, ngpus, ring=True, min_ch=1, max_ch=MAXCHANNELS // 2)
    tree, _ = _search(bw, cc, ngpus, ring=False, min_ch=ring, max_ch=ring)
    return min(MAXCHANNELS, 2 * min(ring, tree or ring))


def nvls_channels(compute_capability: str | int | None) -> int:
    """``comm->nvlsChannels`` when NVLS is on (nvls.cc ``ncclNvlsInit``); 0 below cc 9.0."""
    cc = _cc(compute_capability)
    if cc is None or cc < 90:
        return 0
    return NVLS_CHANNELS_SM100 if cc >= 100 else NVLS_CHANNELS_SM90


def nvls_heads(compute_capability: str | int | None, nvlinks: int, ngpus: int) -> int:
    """NVLS heads on one NVSwitch node: every GPU when ``(n + 1) x speed`` fits a GPU's links
    at some speed of the array (search.cc ``ncclTopoSearchTryNvls``), else 0 (NVLS off)."""
    cc = _cc(compute_capability)
    if cc is None or cc < 90 or ngpus <= 2:
        return 0
    bw = nvlinks * nvlink_bw(cc)
    return ngpus if any((ngpus + 1) * s <= bw for s in speeds(cc)) else 0


def nvls_bytes(
    compute_capability: str | int | None,
    nvlinks: int,
    ngpus: int,
    version: tuple[int, ...] | None = None,
    channels: int | None = None,
) -> int:
    """One rank's NVLS buffers (``ncclNvlsBufferSetup``: channels x 2 x chunk x steps x heads)
    plus the credits (``ncclNvlsSetup``), before the driver's granularity. An NCCL ``version``
    before 2.22 sizes them by the communicator's ``channels`` with a 2 MiB block each
    (``NVLS_PER_CHANNEL_UNTIL``); unknown: the 2.22 - 2.30 rule."""
    heads = nvls_heads(compute_capability, nvlinks, ngpus)
    ch = nvls_channels(compute_capability)
    if version is not None and version < NVLS_PER_CHANNEL_UNTIL and heads and ch:
        return max(ch, channels or 0) * 2 * heads * (NVLS_CHUNKSIZE * NCCL_STEPS + NVLS_MEM_ALIGN_SIZE)
    return ch * 2 * heads * (NVLS_CHUNKSIZE * NCCL_STEPS + NVLS_CREDIT)


def _align(n: int) -> int:
    return -(-n // CUDA_IPC_MIN) * CUDA_IPC_MIN


def p2p_side_bytes(read: bool) -> tuple[int, int]:
    """(sender's, receiver's) device bytes of one P2P connection (p2p.cc)."""
    send = CONN_HEADER + (SIMPLE_BUFFSIZE if read else 0)
    recv = CONN_HEADER + LL_BUFFSIZE + LL128_BUFFSIZE + (0 if read else SIMPLE_BUFFSIZE)
    return _align(send), _align(recv)


def chain_connections(ngpus: int, position: str) -> tuple[int, int]:
    """(sends, receives) per channel of a rank when the ring and the tree chain run in the
    same order on one node: ``position`` "head" (rank 0), "middle" or "tail" (rank n-1)."""
    if ngpus <= 1:
        return 0, 0
    if ngpus == 2:
        return 1, 1  # ring and tree both to the one peer
    return {"head": (1, 2), "tail": (2, 1)}.get(position, (2, 2))


@dataclass(frozen=True)
class CommMemory:
    """One communicator's device memory on one rank: ``low`` is what is certain, ``high``
    what it comes to when every uncertain part allocates; ``parts`` name them."""

    low: int
    high: int
    parts: dict[str, int]
    derived: bool  # False: the topology is not one the source pins down (a range)
    note: str = ""


def communicator_bytes(
    *,
    ngpus: int,
    compute_capability: str | int | None,
    nvlinks: int | None,
    nvswitch: bool | None,
    connect_at_init: bool,
    multicast: bool | None,
    position: str = "middle",
    version: tuple[int, ...] | None = None,
) -> CommMemory:
    """One NCCL communicator of ``ngpus`` ranks on one node, on one rank, right after
    ``ncclCommInitRank`` (``connect_at_init``: NCCL_CUMEM_ENABLE=0 or NCCL_RUNTIME_CONNECT=0,
    so ``runtimeConn`` is off) or after its first collectives (``connect_at_init`` False:
    then ``low`` is 0, nothing being connected before a collective needs it).

    Derived for a full NVSwitch node (``nvswitch``) and for two GPUs joined by NVLink;
    elsewhere (PCIe, partial NVLink meshes, unknown links) a range from 0. ``version``: the
    NCCL release, where it changes a size (NVLS before 2.22, :func:`nvls_bytes`); the channel
    search is the 2.26.2 one for every release (extrapolated before it)."""
    if ngpus <= 1:
        return CommMemory(0, 0, {}, True)
    cc = _cc(compute_capability)
    star = bool(nvlinks) and (nvswitch or ngpus == 2)
    if cc is None or not star or nvlinks is None:
        return CommMemory(
            0,
            0,
            {},
            False,
            "channels and transport not derivable for this interconnect (PCIe or SHM, a partial NVLink mesh, "
            "or unknown links): from 0",
        )
    channels = nvswitch_channels(cc, nvlinks, ngpus) or 0
    read = cc == 80
    send, recv = p2p_side_bytes(read)
    sends, recvs = chain_connections(ngpus, position)
    rings_trees = channels * (sends * send + recvs * recv)
    nvls = nvls_bytes(cc, nvlinks, ngpus, version, channels) if nvswitch else 0
    parts = {"rings_and_trees": rings_trees}
    if nvls:
        parts["nvls"] = nvls
    if not connect_at_init:
        # lazily connected: nothing is certain before a collective runs
        return CommMemory(0, rings_trees + nvls, parts, True, "NCCL connects on first use (cuMem on)")
    low = rings_trees + (nvls if multicast else 0)
    high = rings_trees + (nvls if multicast is not False else 0)
    note = "" if multicast is not None else "NVLS counted only in the high end: multicast support unknown"
    return CommMemory(low, high, parts, True, note)


# ---- P2P operations (send / recv: torch.distributed.gather) ---------------------------------
#
# Read at tags v2.21.5-1 (torch 2.5.1 / 2.6.0), v2.26.2-1 and v2.30.7-1; one node only.
#
# - Channels (src/graph/paths.cc ``ncclTopoComputeP2pChannels``; 2.29+ splits the per-peer part
#   into ``ncclTopoComputeP2pChannelsPerPeer``): ``p2pnChannels = pow2Up(min(nChannels,
#   NCCL_MAX_P2P_NCHANNELS 64))`` and ``p2pnChannelsPerPeer = pow2Up(min(p2pnChannels, peer))``,
#   ``peer`` the least over the node's peers of ``ncclTopoGetNchannels``: ``2 x max(1, path bw /
#   ncclTopoNVLinkBw)`` over NVLink (a GPU's NVLinks to the switch, or to its one peer), 2 over
#   PCIe. 2.30's order (pow2Up each, then the min; the network clamp only with nNodes > 1) gives
#   the same on one node. 8 x H100 / H200 (24 channels, 18 links): min(24, 36) -> 32; 8 x A100
#   (24, 12 links): 32; 2 x H100 (18 links): the ring's channels rounded up.
# - Connections (src/enqueue.cc ``ncclEnqueueCheck`` / ``p2pTaskAppend``, "Mark channels that
#   need pre-connect"): the first send (recv) to a peer marks ``connectSend`` (``connectRecv``)
#   on every one of its ``p2pnChannelsPerPeer`` channels, connector ``send[1]`` / ``recv[1]``
#   ("P2P uses only 1 connector": connIndex 1, not shared with the rings' connIndex 0), made in
#   the group's preconnect with or without cuMem.
# - Bytes (src/transport/p2p.cc ``p2pSendSetup`` / ``p2pRecvSetup``, ``graph`` NULL so the read
#   flag is kept): the same sizes as a ring connection (``p2p_side_bytes``) — the receiver
#   allocates LL, LL128 and (without read) SIMPLE, the sender the header (and SIMPLE with read).
#
# ``torch.distributed.gather`` over NCCL (torch/csrc/cuda/nccl.cpp ``torch::cuda::nccl::gather``, read
# at pytorch/pytorch commit 0033e774 of main; the 2.5.1 / 2.6.0 that vLLM 0.6.4 - 0.8.x pin not read):
# the root posts a ``ncclRecv`` from every other rank, each other rank one ``ncclSend`` to the
# root, in one group. So the root receives on ``p2pnChannelsPerPeer`` channels from each of its
# ``n - 1`` peers (8 x H200: 7 x 32 x 10 MiB = 2.19 GiB) and every other rank sends on as many
# to the root (32 x 2 MiB; 32 x 6 MiB with P2P read on A100).
MAX_P2P_NCHANNELS = MAXCHANNELS
#: ncclTopoGetNchannels between two GPUs of one node over PCIe
P2P_PCIE_CHANNELS_PER_PEER = 2


def _pow2_up(n: int) -> int:
    p = 1
    while p < n:
        p <<= 1
    return p


def p2p_channels_per_peer(compute_capability: str | int | None, nvlinks: int | None, ngpus: int) -> int | None:
    """``p2pnChannelsPerPeer`` of a communicator on one NVSwitch node (or two GPUs joined by
    ``nvlinks`` NVLinks); None where the ring channels are not derived."""
    channels = nvswitch_channels(compute_capability, nvlinks or 0, ngpus)
    if not channels or not nvlinks:
        return None
    p2p = _pow2_up(min(channels, MAX_P2P_NCHANNELS))
    return min(p2p, _pow2_up(min(channels, 2 * max(1, nvlinks))))


def gather_bytes(
    *,
    ngpus: int,
    compute_capability: str | int | None,
    nvlinks: int | None,
    nvswitch: bool | None,
    root: bool,
) -> CommMemory:
    """The P2P connections one ``torch.distributed.gather`` over a communicator of ``ngpus``
    ranks on one node leaves on one rank: the ``root``'s receives from every peer, or another
    rank's send to the root (see above). Made at the first gather whether or not cuMem is on.
    Where the channels are not derived (PCIe, partial meshes): from 0 up to the PCIe count of
    channels a peer (2) at the P2P transport's sizes (the SHM transport's sit in host memory)."""
    if ngpus <= 1:
        return CommMemory(0, 0, {}, True)
    cc = _cc(compute_capability)
    send, recv = p2p_side_bytes(cc == 80)
    star = bool(nvlinks) and (bool(nvswitch) or ngpus == 2)
    per_peer = p2p_channels_per_peer(cc, nvlinks, ngpus) if cc is not None and star else None
    if per_peer is None:
        high = (ngpus - 1) * P2P_PCIE_CHANNELS_PER_PEER * recv if root else P2P_PCIE_CHANNELS_PER_PEER * send
        return CommMemory(0, high, {"p2p_gather": high}, False, "P2P channels not derivable for this interconnect")
    b = (ngpus - 1) * per_peer * recv if root else per_peer * send
    return CommMemory(b, b, {"p2p_gather": b}, True)


def allgather_bytes(
    *,
    ngpus: int,
    compute_capability: str | int | None,
    nvlinks: int | None,
    nvswitch: bool | None,
    multicast: bool | None,
    version: tuple[int, ...] | None = None,
) -> int:
    """The device bytes an all-gather certainly connects on one rank of a lazily connected
    (cuMem) communicator on one node: NCCL runs it as a ring or, with NVLS, over NVLS
    (src/graph/tuning.cc ``ncclTopoTuneModel`` at v2.26.2-1: an all-gather skips every
    algorithm but RING, PAT, NVLS and CollNet; PAT needs one GPU a node, CollNet a network),
    and the ring's first use connects every channel (src/transport/generic.cc
    ``ncclTransportRingConnect``: send to ``ring.next``, receive from ``ring.prev``). Where NVLS
    may run (more than two GPUs with multicast not known off) the smaller of the two is what is
    certain. 0 where the channels are not derived."""
    if ngpus <= 1:
        return 0
    cc = _cc(compute_capability)
    star = bool(nvlinks) and (bool(nvswitch) or ngpus == 2)
    if cc is None or not star:
        return 0
    channels = nvswitch_channels(cc, nvlinks or 0, ngpus) or 0
    send, recv = p2p_side_bytes(cc == 80)
    ring = channels * (send + recv)
    nvls = nvls_bytes(cc, nvlinks or 0, ngpus, version, channels) if nvswitch and multicast is not False else 0
    return min(ring, nvls) if nvls else ring


# ---- across nodes: the network transport (src/transport/net.cc) -----------------------------
#
# Read in NVIDIA/nccl src/transport/net.cc as the code index stores it (commit 022c022a, the 2.30
# line) and src/include/device.h; the buffer sizes are the ones above (v2.26.2-1 - 2.30.7).
# ``sendProxyConnect`` / ``recvProxyConnect``, for a ring / tree connection (``shared`` is 0:
# ``graph || connIndex == 0``):
#
# - the sender maps LL, LL128 and SIMPLE with ``NCCL_NET_MAP_ADD_POINTER(map, 0, p != LL &&
#   useGdr, buffSizes[p], ...)``: LL128 and SIMPLE on the GPU only with GPUDirect RDMA, LL always
#   in host memory; ``sendMem`` / ``recvMem`` in host memory (``dev`` 0);
# - the receiver maps all three protocols on the GPU when ``useGdr``, else in host memory;
# - the GPU part is one allocation, rounded up to ``CUDA_IPC_MIN`` (ALIGN_SIZE) with cuMem
#   (``ncclP2pAllocateShareableBuffer``), a plain ``ncclCudaCalloc`` without it.
#
# So without GPUDirect RDMA (``ncclTopoCheckGdr`` says no: the socket transport, an IB NIC
# without nvidia-peermem / DMA-BUF, NCCL_NET_GDR_LEVEL=LOC) a network connection takes no device
# memory at all; with it, 10 MiB a side (``NET_SEND_GDR`` / ``NET_RECV_GDR``).
#
# Connections a rank makes over the network, per channel: the ring's send to ``ring.next`` and
# receive from ``ring.prev`` when those sit on other nodes (at most one of each); the tree's
# (src/include/device.h: "Nodes inside the binary tree can have two nodes down (+1
# intra-node)", ``NCCL_MAX_TREE_ARITY`` 3, so across nodes one up and at most two down) a send and
# a receive to each, at most ``nodes - 1`` distinct nodes. Channels: at most ``MAXCHANNELS`` (the
# count NCCL settles on follows the NICs' speed and number, src/graph/search.cc, which the facts
# do not hold; NCCL_MAX_NCHANNELS caps it). Whether GPUDirect RDMA is used and how many channels
# run are decided at runtime: the low end is 0, the high end every channel at the most peers.
NET_TREE_PEERS_MAX = 3
NET_SEND_GDR = -(-(LL128_BUFFSIZE + SIMPLE_BUFFSIZE) // CUDA_IPC_MIN) * CUDA_IPC_MIN
NET_RECV_GDR = -(-(LL_BUFFSIZE + LL128_BUFFSIZE + SIMPLE_BUFFSIZE) // CUDA_IPC_MIN) * CUDA_IPC_MIN


def net_peers_per_channel(nodes: int) -> int:
    """The most ranks on other nodes one rank sends to (and receives from) per channel: the
    ring's neighbour and the tree's up and downs (see above); 0 on one node."""
    if nodes <= 1:
        return 0
    return 1 + min(NET_TREE_PEERS_MAX, nodes - 1)


def multinode_communicator_bytes(
    *,
    nodes: int,
    gdr: bool | None = None,
    max_channels: int = MAXCHANNELS,
    intra: CommMemory | None = None,
) -> CommMemory:
    """One NCCL communicator whose ranks span ``nodes`` nodes, on one rank: the network
    transport's device buffers (0 without GPUDirect RDMA, ``gdr`` False; unknown spans both)
    at up to ``max_channels`` channels, plus ``intra`` (the rank's connections to the GPUs of
    its own node, :func:`communicator_bytes`) where given."""
    peers = net_peers_per_channel(nodes)
    net_high = 0 if gdr is False else max(0, max_channels) * peers * (NET_SEND_GDR + NET_RECV_GDR)
    parts = {"network": net_high}
    low = high = 0
    if intra is not None:
        parts.update({f"intra_{k}": v for k, v in intra.parts.items()})
        low, high = intra.low, intra.high
    note = (
        "across nodes: NCCL's network buffers sit on the GPU only with GPUDirect RDMA, on as many "
        "channels as the NICs carry (src/transport/net.cc): from 0"
    )
    return CommMemory(low, high + net_high, parts, False, note)


def env_max_channels(env: dict[str, str | None] | None) -> int:
    """NCCL_MAX_NCHANNELS (or its older name NCCL_MAX_NRINGS) as a cap on the channels, else
    ``MAXCHANNELS`` (src/graph/connect.cc ``ncclTopoPostset`` honours it)."""
    for name in ("NCCL_MAX_NCHANNELS", "NCCL_MAX_NRINGS"):
        raw = ((env or {}).get(name) or "").strip()
        if raw.isdigit() and int(raw) > 0:
            return min(MAXCHANNELS, int(raw))
    return MAXCHANNELS


def env_gdr(env: dict[str, str | None] | None) -> bool | None:
    """False where NCCL_NET_GDR_LEVEL turns GPUDirect RDMA off (``LOC`` or 0: src/graph/paths.cc
    ``ncclTopoCheckGdr`` compares the GPU-NIC path with it), else unknown."""
    raw = ((env or {}).get("NCCL_NET_GDR_LEVEL") or "").strip().upper()
    return False if raw in ("LOC", "0") else None


def connects_at_init(env: dict[str, str | None] | None, vllm_forces_cumem_off: bool) -> bool:
    """Whether ``runtimeConn`` is off: cuMem disabled (vLLM before 0.10.2 sets
    NCCL_CUMEM_ENABLE=0 itself unless the variable is set to something else, env_override.py)
    or NCCL_RUNTIME_CONNECT=0."""
    env = env or {}
    if (env.get("NCCL_RUNTIME_CONNECT") or "").strip() == "0":
        return True
    cumem = (env.get("NCCL_CUMEM_ENABLE") or "").strip()
    if cumem:
        return cumem == "0"
    return vllm_forces_cumem_off


#: NCCL 2.29 fails communicator init (``ncclUnhandledCudaError``, "Failed to bind NVLink SHARP
#: (NVLS) Multicast memory") where 2.28 logged the failed bind and fell back to plain NVLink
#: (NVIDIA/nccl#2077: 2.29.7 fatal, 2.28.9 graceful): from 2.29 NCCL_NVLS_ENABLE=0 is required
#: on a node whose multicast bind fails, before it an optional guard.
NVLS_BIND_FATAL_SINCE = (2, 29)
#: The wheels that carry libnccl (their version is NCCL's).
NCCL_PACKAGES = ("nvidia-nccl-cu13", "nvidia-nccl-cu12")
#: src/transport/nvls.cc ``ncclNvlsInit`` / ``ncclNvlsSetup`` (every NCCL with NVLS: 2.17's
#: default NCCL_NVLS_ENABLE=1 and 2.18+'s default 2 both read it): ``nvlsSupport`` is the
#: driver's CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED unless NCCL_NVLS_ENABLE forces it (1 from
#: 2.18), so where the attribute is 0 on every GPU NCCL builds no NVLS by itself and
#: NCCL_NVLS_ENABLE=0 changes nothing. Only "1" forces NVLS past the attribute.
NVLS_FORCED_VALUE = "1"
