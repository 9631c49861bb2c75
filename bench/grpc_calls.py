"""Benchmark: what one gRPC request/response exchange costs in each call form.

One grpc.aio server in a process of its own, run as the services run it (`ServiceRuntime`, with
its interceptors and the anchor method), serves a trivial echo as a unary method and as a
bidirectional stream method. A fresh client process per run makes `--exchanges` sequential
exchanges of a `--size`-byte message in one form:

    a  sync-unary    synchronous channel, unary `future()` with the anchor call open, the way
                     `ChannelPool.send` calls; the caller waits on the future
    b  sync-stream   synchronous channel, one bidirectional stream: requests fed from a queue,
                     responses read by a thread that hands each to the caller
    c  aio-unary     grpc.aio channel on an event loop thread; the caller (another thread) submits
                     each call with `run_coroutine_threadsafe` and waits for its result
    d  aio-stream    grpc.aio channel, one bidirectional stream on the loop thread; the caller
                     submits each write+read pair the same way
    c* / d*          c and d with the exchange loop itself on the event loop (no thread hop)

For each form: exchanges/s, the server's CPU per exchange (its /proc/<pid>/stat), the client's
(`resource.getrusage` of its process, every thread) and the total, each the median of `--rounds`
rounds (forms alternate inside each round), with the range, and the total's ratio to form a.

    TMPDIR=/dev/shm python bench/grpc_calls.py [--exchanges 5000] [--size 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import resource
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import grpc  # noqa: E402

from services.common.service import ANCHOR_METHOD, GRPC_OPTIONS, ServiceRuntime  # noqa: E402

SERVICE = "odradek.bench.v1.Echo"
UNARY = f"/{SERVICE}/Unary"
STREAM = f"/{SERVICE}/Stream"
FORMS = ("a", "b", "c", "d", "c*", "d*")
FORM_NAMES = {"a": "sync-unary", "b": "sync-stream", "c": "aio-unary", "d": "aio-stream",
              "c*": "aio-unary on loop", "d*": "aio-stream on loop"}
WARM_UP = 200
TICKS = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------- server


def serve() -> None:
    async def unary(request: bytes, _context) -> bytes:
        return request

    async def stream(requests, _context):
        async for request in requests:
            yield request

    runtime = ServiceRuntime("bench", "127.0.0.1:0")
    handler = grpc.method_handlers_generic_handler(SERVICE, {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.stream_stream_rpc_method_handler(stream),
    })
    runtime.add_servicer(lambda _servicer, server: server.add_generic_rpc_handlers((handler,)), None)
    port = runtime.start()
    print(port, flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    runtime.shutdown(1.0)


def process_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


# ---------------------------------------------------------------------- client forms


def self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def sync_unary(target: str, payload: bytes, exchanges: int) -> tuple[float, float]:
    channel = grpc.insecure_channel(target, options=GRPC_OPTIONS)
    anchor = channel.unary_stream(ANCHOR_METHOD)(b"")
    rpc = channel.unary_unary(UNARY)
    for _ in range(WARM_UP):
        rpc.future(payload, timeout=10).result()
    cpu, started = self_cpu_s(), time.perf_counter()
    for _ in range(exchanges):
        rpc.future(payload, timeout=10).result()
    elapsed, cpu = time.perf_counter() - started, self_cpu_s() - cpu
    anchor.cancel()
    channel.close()
    return elapsed, cpu


def sync_stream(target: str, payload: bytes, exchanges: int) -> tuple[float, float]:
    channel = grpc.insecure_channel(target, options=GRPC_OPTIONS)
    requests: queue.SimpleQueue = queue.SimpleQueue()
    responses: queue.SimpleQueue = queue.SimpleQueue()
    call = channel.stream_stream(STREAM)(iter(requests.get, None))

    def read() -> None:
        for response in call:
            responses.put(response)
        responses.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    for _ in range(WARM_UP):
        requests.put(payload)
        responses.get()
    cpu, started = self_cpu_s(), time.perf_counter()
    for _ in range(exchanges):
        requests.put(payload)
        responses.get()
    elapsed, cpu = time.perf_counter() - started, self_cpu_s() - cpu
    requests.put(None)
    reader.join(10)
    channel.close()
    return elapsed, cpu


def aio_form(target: str, payload: bytes, exchanges: int, streamed: bool, on_loop: bool) -> tuple[float, float]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def run(coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    async def open_():
        channel = grpc.aio.insecure_channel(target, options=GRPC_OPTIONS)
        if streamed:
            call = channel.stream_stream(STREAM)()
            return channel, call
        return channel, channel.unary_unary(UNARY)

    channel, call = run(open_())

    async def exchange():
        if streamed:
            await call.write(payload)
            return await call.read()
        return await call(payload, timeout=10)

    async def loop_of(count: int) -> tuple[float, float]:
        cpu, started = self_cpu_s(), time.perf_counter()
        for _ in range(count):
            await exchange()
        return time.perf_counter() - started, self_cpu_s() - cpu

    for _ in range(WARM_UP):
        run(exchange())
    if on_loop:
        elapsed, cpu = run(loop_of(exchanges))
    else:
        cpu, started = self_cpu_s(), time.perf_counter()
        for _ in range(exchanges):
            run(exchange())
        elapsed, cpu = time.perf_counter() - started, self_cpu_s() - cpu

    async def close():
        if streamed:
            await call.done_writing()
        await channel.close()

    run(close())
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    return elapsed, cpu


def client(form: str, target: str, size: int, exchanges: int) -> None:
    payload = os.urandom(size)
    if form == "a":
        elapsed, cpu = sync_unary(target, payload, exchanges)
    elif form == "b":
        elapsed, cpu = sync_stream(target, payload, exchanges)
    else:
        elapsed, cpu = aio_form(target, payload, exchanges, streamed=form.startswith("d"),
                                on_loop=form.endswith("*"))
    print(json.dumps({"elapsed_s": elapsed, "cpu_s": cpu}), flush=True)


# ---------------------------------------------------------------------- driver


def measure(form: str, target: str, server_pid: int, args) -> dict[str, float]:
    """One client run; the server's CPU is read around the client's whole process, so its
    warm-up and set-up are subtracted by a second run of `WARM_UP` exchanges only."""
    def run(exchanges: int) -> tuple[dict, float]:
        before = process_cpu_s(server_pid)
        out = subprocess.run([sys.executable, __file__, "--client", form, "--target", target,
                              "--size", str(args.size), "--exchanges", str(exchanges)],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1]), process_cpu_s(server_pid) - before

    full, server_full = run(args.exchanges)
    _, server_base = run(1)
    n = args.exchanges
    server_us = max(server_full - server_base, 0.0) / (n - 1) * 1e6
    client_us = full["cpu_s"] / n * 1e6
    return {"rate": n / full["elapsed_s"], "server_us": server_us, "client_us": client_us,
            "total_us": server_us + client_us}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=5000, help="exchanges per run")
    parser.add_argument("--size", type=int, default=200, help="bytes of each message")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (every form once per round)")
    parser.add_argument("--forms", default=",".join(FORMS), help="comma-separated forms to run")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.client:
        client(args.client, args.target, args.size, args.exchanges)
        return

    forms = [form for form in args.forms.split(",") if form]
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        target = f"127.0.0.1:{int(server.stdout.readline())}"
        results: dict[str, list[dict[str, float]]] = {form: [] for form in forms}
        for round_ in range(args.rounds):
            order = forms if round_ % 2 == 0 else forms[::-1]
            for form in order:
                results[form].append(measure(form, target, server.pid, args))
            print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        server.stdin.close()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()

    def cell(form: str, key: str, digits: int = 0) -> str:
        values = [run[key] for run in results[form]]
        return (f"{statistics.median(values):.{digits}f} "
                f"({min(values):.{digits}f}-{max(values):.{digits}f})")

    base = statistics.median(run["total_us"] for run in results[forms[0]])
    print(f"{args.exchanges} sequential exchanges of {args.size} bytes, median (range) of {args.rounds} rounds")
    print(f"{'form':<22} {'exchanges/s':>18} {'server us/ex':>16} {'client us/ex':>16} "
          f"{'total us/ex':>16} {'total vs ' + forms[0]:>10}")
    for form in forms:
        total = statistics.median(run["total_us"] for run in results[form])
        print(f"{form + ' ' + FORM_NAMES[form]:<22} {cell(form, 'rate'):>18} {cell(form, 'server_us'):>16} "
              f"{cell(form, 'client_us'):>16} {cell(form, 'total_us'):>16} {base / total:>9.2f}x")


if __name__ == "__main__":
    main()
