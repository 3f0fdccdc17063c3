/* A library loaded with dlopen after recording starts: its nap() blocks in usleep(). */
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void nap_inner(void) {
    usleep(20000);
    sink += 1;
}

void nap(void) {
    nap_inner();
    sink += 1;
}
