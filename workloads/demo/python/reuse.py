"""Two functions whose code objects have one address, one after the other.

`first_napper` naps 50 times and is freed with its code object; functions named
`second_napper` are then compiled until one's code object lands at the freed address,
and it naps 50 times. A profiler that names code objects by address alone names the
second one's naps after the first.
"""
import sys
import time


def build(name):
    """A function `name` that naps `n` times, compiled from its own source: its code
    object lives only as long as the function."""
    ns = {"time": time}
    src = f"def {name}(n):\n    for _ in range(n):\n        time.sleep(0.01)\n"
    exec(compile(src, f"{name}.py", "exec"), ns)
    return ns[name]


def main():
    first = build("first_napper")
    addr = id(first.__code__)
    first(50)
    del first
    for _ in range(100_000):
        second = build("second_napper")
        if id(second.__code__) == addr:
            break
        del second
    else:
        print("no code object came back at the freed address", file=sys.stderr)
        sys.exit(3)
    second(50)
    print(f"both code objects at {addr:#x}", file=sys.stderr)


main()
