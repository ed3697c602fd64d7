#!/usr/bin/python3
"""redis_py.py: the redis-py peer of bench/throughput.

usage: /usr/bin/python3 bench/peers/redis_py.py --port P --stream S --group G
                                                [--consumer C] [--batch N]

One consumer of a group, written as a redis-py user would write it (Debian's
python3-redis): XREADGROUP with COUNT and BLOCK, each payment decoded with
json.loads and one field read, then the batch's acks sent in one pipeline.
Runs until SIGTERM or SIGINT.
"""
import argparse
import json
import signal
import sys

import redis


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--stream", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--consumer", default="redis-py-0")
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args()

    # Stop at once: what is read and not acked stays pending, as anywhere.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))

    r = redis.Redis(host="127.0.0.1", port=args.port)
    total = 0
    while True:
        reply = r.xreadgroup(args.group, args.consumer, {args.stream: ">"},
                             count=args.batch, block=2000)
        for _stream, entries in reply or ():
            pipe = r.pipeline(transaction=False)
            for entry_id, fields in entries:
                payment = json.loads(fields[b"data"])
                total += payment["amount_cents"]
                pipe.xack(args.stream, args.group, entry_id)
            pipe.execute()


if __name__ == "__main__":
    main()
