/* A server whose requests are spans published by otelctx.c, linked or opened with dlopen.
 *   server SECONDS [LIBRARY]
 * Prints "ready PID" and starts; two threads serve requests for SECONDS: each request
 * attaches its span, sleeps 3 ms (its time off CPU), detaches, then the thread rests 1 ms.
 * Span ids are 0x80000000 | thread << 24 | n, big-endian, in trace (pid, thread, n). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef void (*attach_fn)(const uint8_t *, const uint8_t *);
typedef void (*detach_fn)(void);
static attach_fn attach;
static detach_fn detach;
static double seconds;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void nap(long ns) {
    struct timespec t = {0, ns};
    nanosleep(&t, NULL);
}

static void be64(uint8_t *out, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8)
        out[i] = (uint8_t)v;
}

static void *serve(void *arg) {
    uint64_t thread = (uint64_t)(uintptr_t)arg;
    double end = now() + seconds;
    for (uint64_t n = 1; now() < end; n++) {
        uint8_t trace[16], span[8];
        be64(trace, (uint64_t)getpid());
        be64(trace + 8, thread << 32 | n);
        be64(span, 0x80000000u | thread << 24 | n);
        attach(trace, span);
        nap(3000000);
        detach();
        nap(1000000);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: server SECONDS [LIBRARY]\n");
        return 2;
    }
    seconds = atof(argv[1]);
    void *lib = RTLD_DEFAULT;
    if (argc > 2 && (lib = dlopen(argv[2], RTLD_NOW)) == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    attach = (attach_fn)dlsym(lib, "otel_attach");
    detach = (detach_fn)dlsym(lib, "otel_detach");
    if (attach == NULL || detach == NULL) {
        fprintf(stderr, "no otel_attach/otel_detach\n");
        return 1;
    }
    printf("ready %d\n", getpid());
    fflush(stdout);
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, serve, (void *)(i + 1));
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    return 0;
}
