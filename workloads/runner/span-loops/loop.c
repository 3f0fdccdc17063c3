/* The native loop of bench-overhead's span section: one function called RATE times a second
 * (paced by spinning on the clock between calls), for half a second untimed (a recorder's
 * start is behind it: a span's thresholds are set from its first instances), then CALLS
 * times, each call timed on its own; prints {"calls":…,"rate":…,"per_s":…,"ns_per_call":…},
 * the mean time a call took from just before it to just after it returned.
 *
 *   span-loop push|load RATE CALLS
 *
 * The two functions do the same work and differ in their first instruction, written here in
 * assembly so that no compiler moves it: work_push starts with `push %rbp`, which the kernel
 * emulates at a uprobe; work_load starts with `mov 0x0(%rip),%rax`, which it single-steps,
 * and has no instruction the kernel emulates before its return. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

long work_push(long);
long work_load(long);

__asm__(".text\n"
        ".globl work_push\n"
        ".type work_push,@function\n"
        "work_push:\n"
        "    push %rbp\n"
        "    mov %rsp,%rbp\n"
        "    mov span_sink(%rip),%rax\n"
        "    add %rdi,%rax\n"
        "    mov %rax,span_sink(%rip)\n"
        "    pop %rbp\n"
        "    ret\n"
        ".size work_push,.-work_push\n"
        ".globl work_load\n"
        ".type work_load,@function\n"
        "work_load:\n"
        "    mov span_sink(%rip),%rax\n"
        "    add %rdi,%rax\n"
        "    mov %rax,span_sink(%rip)\n"
        "    ret\n"
        ".size work_load,.-work_load\n"
        ".bss\n"
        ".align 8\n"
        "span_sink:\n"
        "    .zero 8\n"
        ".text\n");

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[1], "push") && strcmp(argv[1], "load"))) {
        fprintf(stderr, "usage: %s push|load RATE CALLS\n", argv[0]);
        return 2;
    }
    long (*work)(long) = strcmp(argv[1], "push") ? work_load : work_push;
    long long rate = atoll(argv[2]), calls = atoll(argv[3]);
    if (rate <= 0 || calls <= 0) {
        fprintf(stderr, "RATE and CALLS must be positive\n");
        return 2;
    }
    const long long period = 1000000000LL / rate;
    const long long start = now(), warm_until = start + 500000000LL;
    long long next = start, in_calls = 0, first = 0, timed = 0;
    for (long long i = 0; timed < calls; i++) {
        long long t0;
        while ((t0 = now()) < next)
            ;
        /* Behind (a call slower than the period): the next one goes at once, no burst. */
        next = next + period > t0 ? next + period : t0 + period;
        work(i);
        long long t1 = now();
        if (t0 >= warm_until) {
            if (timed++ == 0)
                first = t0;
            in_calls += t1 - t0;
        }
    }
    double seconds = (now() - first) / 1e9;
    printf("{\"calls\":%lld,\"rate\":%lld,\"per_s\":%.0f,\"ns_per_call\":%.1f}\n", calls, rate,
           calls / seconds, (double)in_calls / calls);
    return 0;
}
