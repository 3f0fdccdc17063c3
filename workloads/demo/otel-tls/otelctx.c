/* OpenTelemetry thread context (OTEP 4947) published from a shared library: the library
 * defines otel_thread_ctx_v1 and its own code reaches it through whatever TLS access model
 * it is built with (initial-exec, general-dynamic, TLS descriptors), so a reader must find
 * the variable the way that model's relocations say. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct otel_record {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t valid;
    uint8_t trace_flags;
    uint16_t attrs_size;
    uint8_t attrs[612];
} __attribute__((packed));

__attribute__((visibility("default"))) __thread struct otel_record *otel_thread_ctx_v1;

/* From now on this thread serves span `span` of trace `trace`. */
__attribute__((visibility("default"))) void otel_attach(const uint8_t trace[16], const uint8_t span[8]) {
    struct otel_record *r = otel_thread_ctx_v1;
    if (r == NULL) {
        r = calloc(1, sizeof *r);
        if (r == NULL)
            abort();
        otel_thread_ctx_v1 = r;
    }
    r->valid = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    memcpy(r->trace_id, trace, 16);
    memcpy(r->span_id, span, 8);
    r->trace_flags = 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    r->valid = 1;
}

/* This thread serves no span any more. */
__attribute__((visibility("default"))) void otel_detach(void) {
    struct otel_record *r = otel_thread_ctx_v1;
    if (r != NULL)
        r->valid = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
