//! The OpenTelemetry thread context's TLS variable in the dynamic symbol table, as OTEP 4947
//! asks of a program that publishes one (the harness defines it; the server publishes each
//! traced request's span in it).
fn main() {
    println!(
        "cargo:rustc-link-arg-bin=asset-server=-Wl,--export-dynamic-symbol=otel_thread_ctx_v1"
    );
}
