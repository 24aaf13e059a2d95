"""A TCP relay that adds a fixed delay to every byte in each direction: the wire of
``scripts/two_hosts.sh`` where the kernel has no ``sch_netem`` (``tc qdisc ... netem delay``).

    python scripts/delay_relay.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS

Bytes are forwarded in order, each ``DELAY_MS`` after it arrived (as netem delays every
packet on an interface's way out): a request and its reply each take the delay once, so a
round trip through the relay takes two delays more than without it.
"""
import asyncio
import sys


async def pipe(reader, writer, delay: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    async def send():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    sender = asyncio.create_task(send())
    try:
        while data := await reader.read(1 << 16):
            queue.put_nowait((loop.time() + delay, data))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait((0.0, None))
    await sender


async def main(listen_host, listen_port, target_host, target_port, delay_ms) -> None:
    delay = float(delay_ms) / 1000

    async def client(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(target_host, int(target_port))
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer, delay), pipe(up_reader, writer, delay), return_exceptions=True)

    server = await asyncio.start_server(client, listen_host, int(listen_port))
    print(f"delay_relay: {listen_host}:{listen_port} -> {target_host}:{target_port}, {delay_ms} ms each way", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    asyncio.run(main(*sys.argv[1:]))
