"""The Python loops of `just bench-overhead`: what recording costs a Python target.

    bench.py pingpong ROUNDS     two threads pass a byte back and forth through two pipes
                                 (two context switches per round trip)
    bench.py spin ITERS DEPTH    arithmetic ITERS times, DEPTH Python calls deep

Each prints one JSON line: {"ns_per_round_trip": …} or {"elapsed_ns": …}.
"""

import json
import os
import sys
import threading
import time


def pingpong(rounds):
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()

    def echo():
        for _ in range(rounds):
            os.read(a_r, 1)
            os.write(b_w, b"x")

    t = threading.Thread(target=echo)
    t.start()
    start = time.perf_counter_ns()
    for _ in range(rounds):
        os.write(a_w, b"x")
        os.read(b_r, 1)
    elapsed = time.perf_counter_ns() - start
    t.join()
    print(json.dumps({"ns_per_round_trip": elapsed / rounds}))


def work(iters):
    total = 0
    for i in range(iters):
        total += i * i % 7
    return total


def nest(depth, iters):
    if depth == 0:
        return work(iters)
    return nest(depth - 1, iters)


def spin(iters, depth):
    start = time.perf_counter_ns()
    nest(depth, iters)
    print(json.dumps({"elapsed_ns": time.perf_counter_ns() - start}))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "pingpong":
        pingpong(int(sys.argv[2]))
    elif mode == "spin":
        spin(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(f"unknown mode {mode!r}: pingpong ROUNDS | spin ITERS DEPTH")
