/* A target with known stacks and no frame pointers anywhere (built -O2 -fomit-frame-pointer,
 * linking the distribution's glibc, which keeps none either). Every function that must show
 * in a stack is noinline and called outside tail position.
 *
 *   nofp run ROUNDS     ROUNDS times: sleeper() naps 5 x 20 ms in usleep(), burn() spins
 *                       100 ms in hot_leaf()
 *   nofp fork ROUNDS    fork, the child execs `nofp run ROUNDS`, the parent waits
 *   nofp dlopen LIB N   dlopen LIB (built from nap.c) after 200 ms, call its nap() N times
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) void hot_leaf(unsigned long n) {
    unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++) x += i * 2654435761u;
    sink = x;
}

__attribute__((noinline)) void burn(double secs) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        hot_leaf(200000);
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9 < secs);
    sink += 1;
}

__attribute__((noinline)) void sleeper(int n) {
    for (int i = 0; i < n; i++) usleep(20000);
    sink += 1;
}

__attribute__((noinline)) void call_library(void (*nap)(void), int n) {
    for (int i = 0; i < n; i++) nap();
    sink += 1;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "run") == 0) {
        int rounds = atoi(argv[2]);
        for (int r = 0; r < rounds; r++) {
            sleeper(5);
            burn(0.1);
        }
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "fork") == 0) {
        pid_t child = fork();
        if (child == 0) {
            execl("/proc/self/exe", argv[0], "run", argv[2], (char *)NULL);
            _exit(127);
        }
        int status = 0;
        waitpid(child, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    }
    if (argc >= 4 && strcmp(argv[1], "dlopen") == 0) {
        usleep(200000);
        void *lib = dlopen(argv[2], RTLD_NOW);
        if (!lib) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 1;
        }
        void (*nap)(void) = (void (*)(void))dlsym(lib, "nap");
        if (!nap) return 1;
        call_library(nap, atoi(argv[3]));
        return 0;
    }
    fprintf(stderr, "usage: nofp run ROUNDS | fork ROUNDS | dlopen LIB N\n");
    return 2;
}
