"""A Python target with known stacks, for the frame walk's tests.

Three threads beside the main one:
- `sleeper`: sleeper_loop -> nap -> time.sleep, off CPU;
- `cruncher`: cruncher_loop -> crunch, on CPU (pure Python arithmetic);
- `waiter`: waiter_loop -> wait_for_ping -> Event.wait, woken by the main thread from
  ping_loop -> ping -> Event.set (a waker stack with Python frames).

Runs for the seconds given (default 3), then prints one JSON line with what each thread did.
"""

import json
import sys
import threading
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
stop = threading.Event()
ping_event = threading.Event()
counts = {"naps": 0, "crunches": 0, "pings": 0, "wakes": 0}


def nap():
    time.sleep(0.005)


def sleeper_loop():
    while not stop.is_set():
        nap()
        counts["naps"] += 1


def crunch():
    total = 0
    for i in range(20000):
        total += i * i % 7
    return total


def cruncher_loop():
    while not stop.is_set():
        crunch()
        counts["crunches"] += 1


def wait_for_ping():
    ping_event.wait(1.0)
    ping_event.clear()


def waiter_loop():
    while not stop.is_set():
        wait_for_ping()
        counts["wakes"] += 1


def ping():
    ping_event.set()


def ping_loop(deadline):
    while time.monotonic() < deadline:
        time.sleep(0.01)
        ping()
        counts["pings"] += 1


def main():
    threads = [
        threading.Thread(target=sleeper_loop, name="sleeper"),
        threading.Thread(target=cruncher_loop, name="cruncher"),
        threading.Thread(target=waiter_loop, name="waiter"),
    ]
    for t in threads:
        t.start()
    ping_loop(time.monotonic() + SECONDS)
    stop.set()
    ping_event.set()
    for t in threads:
        t.join()
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
