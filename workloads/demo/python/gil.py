"""Two threads fighting for the GIL: each runs pure Python arithmetic for the seconds given
(default 3), so at any moment one holds the GIL and the other waits for it.

Prints one JSON line: each thread's native id, its wall time and its CPU time (s).
"""

import json
import sys
import threading
import time

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
results = {}


def crunch(stop):
    n = 0
    while time.monotonic() < stop:
        for i in range(1000):
            n += i * i
    return n


def fighter():
    start, cpu = time.monotonic(), time.thread_time()
    crunch(start + SECONDS)
    results[threading.get_native_id()] = {
        "wall": time.monotonic() - start,
        "cpu": time.thread_time() - cpu,
    }


threads = [threading.Thread(target=fighter) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(results))
