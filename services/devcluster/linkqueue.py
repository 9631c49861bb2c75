"""Delay, jitter, reordering and loss of one host's outgoing packets in user space, for kernels
without `sch_netem`.

`python -m services.devcluster.linkqueue --queue N --delay-ms D --jitter-ms J --reorder R --loss L`
runs inside a host's network namespace, bound to netfilter queue N (through NetfilterQueue, over
Debian's libnetfilter-queue): each packet the host's `ODRADEK_LINK` iptables chain sends to the
queue is dropped with probability L %, passed at once with probability R % (so it overtakes the
held ones, as netem's `reorder`), and otherwise held D ms plus a uniform draw in [-J, J] ms before
it is accepted. It prints `READY` once bound; on SIGTERM it accepts every packet it holds and
exits. The nemesis starts it (`link:` on such a kernel) and adds the iptables rule after `READY`,
with `--queue-bypass`, so packets pass untouched whenever the process is gone.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import random
import select
import signal
import socket
import sys
import time

READY = "READY"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.devcluster.linkqueue", description=__doc__)
    parser.add_argument("--queue", type=int, required=True, help="the netfilter queue number")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--reorder", type=float, default=0.0, help="percent of packets passed at once")
    parser.add_argument("--loss", type=float, default=0.0, help="percent of packets dropped")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    from netfilterqueue import NetfilterQueue  # only here: needs libnetfilter-queue and a namespace

    rng = random.Random(args.seed)
    held: list[tuple[float, int, object]] = []
    order = itertools.count()
    stopping = False

    def on_packet(packet) -> None:
        draw = rng.uniform(0, 100)
        if draw < args.loss:
            packet.drop()
        elif draw < args.loss + args.reorder:
            packet.accept()
        else:
            delay_ms = max(0.0, args.delay_ms + rng.uniform(-args.jitter_ms, args.jitter_ms))
            heapq.heappush(held, (time.monotonic() + delay_ms / 1000, next(order), packet))

    def stop(_signum, _frame) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    queue = NetfilterQueue()
    queue.bind(args.queue, on_packet, max_len=65536)
    netlink = socket.fromfd(queue.get_fd(), socket.AF_NETLINK, socket.SOCK_RAW)
    print(READY, flush=True)
    try:
        while not stopping:
            wait_s = max(0.0, held[0][0] - time.monotonic()) if held else 0.2
            try:
                readable, _, _ = select.select([netlink], [], [], wait_s)
            except InterruptedError:
                continue
            if readable:
                queue.run(block=False)
            now = time.monotonic()
            while held and held[0][0] <= now:
                heapq.heappop(held)[2].accept()
    finally:
        while held:
            heapq.heappop(held)[2].accept()
        queue.unbind()
        netlink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
