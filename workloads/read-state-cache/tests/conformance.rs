//! One protocol test suite, run against both servers: the same scripted requests must get
//! the same answers, and end in the same summary counts (PROTOCOL.md is the contract).
//!
//! Scenarios that compare counts end the server with `--exit-after-idle`, which waits until
//! every connection has been accounted for, rather than a signal racing the last close.

mod support;

use std::{
    fs,
    io::Read as _,
    thread,
    time::{Duration, Instant},
};

use read_state_cache::{
    protocol::{
        Key, OP_ACK, OP_GET, OP_MENTION, RESPONSE_LEN, Request, Response, STATUS_BAD_LENGTH,
        STATUS_OK, STATUS_UNKNOWN_OP, TRACED, TraceParent,
    },
    store::{HEADER_LEN, LOG_FILE, RECORD_LEN},
};
use serde_json::json;
use support::{Client, Server, counts, go_server, rs, servers, stop, summary};

/// The counts of `sharded_eviction_follows_the_shard_function`.
const HITS: u64 = 236;
const EVICTED_WRITTEN: u64 = 268;

const IDLE_EXIT: [&str; 2] = ["--exit-after-idle", "200"];

/// Runs `scenario` on every server; the summaries' counts must be equal across servers.
#[track_caller]
fn on_both(scenario: impl Fn(&Server) -> serde_json::Value) -> serde_json::Value {
    let mut first: Option<(&'static str, serde_json::Value)> = None;
    for server in servers() {
        let c = counts(&scenario(&server));
        match &first {
            None => first = Some((server.build, c)),
            Some((build, expected)) => assert_eq!(
                &c, expected,
                "{} and {build} counted differently",
                server.build
            ),
        }
    }
    first.expect("at least the Rust server").1
}

/// Waits for the server to end by itself (idle) and returns its summary.
#[track_caller]
fn idle_summary(server: switchyard_harness::ServerProcess) -> serde_json::Value {
    let s = summary(server.wait(Duration::from_secs(30)).expect("server exits"));
    assert_eq!(s["ended_by"], "idle", "{s}");
    s
}

#[test]
fn scripted_sequence() {
    let counts = on_both(|server| {
        let p = server.start(&[
            "--capacity",
            "1000",
            "--flush-interval",
            "1h",
            IDLE_EXIT[0],
            IDLE_EXIT[1],
        ]);
        let mut c = Client::connect(&p);
        let b = server.build;
        assert_eq!(c.ack(1, 10, 100), rs(100, 0), "{b}");
        for n in 1..=3 {
            assert_eq!(c.mention(1, 10), rs(100, n), "{b}");
        }
        assert_eq!(c.get(1, 10), rs(100, 3), "{b}");
        assert_eq!(c.ack(1, 10, 200), rs(200, 0), "{b}: an ack resets mentions");
        assert_eq!(c.get(1, 11), rs(0, 0), "{b}: another channel");
        assert_eq!(c.mention(2, 10), rs(0, 1), "{b}: another user");
        assert_eq!(c.ack(1, 10, 5), rs(5, 0), "{b}: an ack may go back");
        drop(c);
        idle_summary(p)
    });
    assert_eq!(
        counts,
        json!({
            "format": "read-state-cache-summary", "schema_version": 1, "ended_by": "idle",
            "capacity": 1000, "shards": 1, "flush_interval_ms": 3_600_000,
            "requests": 9, "acks": 3, "mentions": 4, "gets": 2,
            "hits": 6, "misses": 3, "loaded": 0, "evictions": 0, "evicted_written": 0,
            // The final pass writes the two dirty entries; (1,11) was only read.
            "flushes": 1, "flushed_entries": 2,
            "bad_requests": 0, "store_errors": 0, "entries": 3,
            "store": {"keys": 2, "records_written": 2, "bytes": HEADER_LEN + 2 * RECORD_LEN as u64},
            "connections": 1, "connection_errors": 0,
        })
    );
}

#[test]
fn eviction_writes_behind_and_a_miss_loads_it_back() {
    let counts = on_both(|server| {
        let p = server.start(&[
            "--capacity",
            "2",
            "--flush-interval",
            "1h",
            IDLE_EXIT[0],
            IDLE_EXIT[1],
        ]);
        let mut c = Client::connect(&p);
        let b = server.build;
        assert_eq!(c.ack(1, 1, 11), rs(11, 0), "{b}");
        assert_eq!(c.ack(1, 2, 12), rs(12, 0), "{b}");
        // Full: (1,1), the least recently used and dirty, is written and evicted.
        assert_eq!(c.ack(1, 3, 13), rs(13, 0), "{b}");
        // Loaded back from the store; (1,2) goes.
        assert_eq!(c.get(1, 1), rs(11, 0), "{b}: (1,1) from the store");
        assert_eq!(c.get(1, 2), rs(12, 0), "{b}: (1,2) from the store");
        assert_eq!(c.mention(1, 1), rs(11, 1), "{b}: a hit");
        // (1,2) is the oldest now, and clean (loaded, unchanged): evicted without a write.
        assert_eq!(c.get(1, 3), rs(13, 0), "{b}: (1,3) from the store");
        // An unknown key evicts the dirty (1,1)…
        assert_eq!(c.get(9, 9), rs(0, 0), "{b}: unknown");
        // …whose mention survived the trip.
        assert_eq!(c.get(1, 1), rs(11, 1), "{b}: (1,1) with its mention");
        drop(c);
        idle_summary(p)
    });
    assert_eq!(
        counts,
        json!({
            "format": "read-state-cache-summary", "schema_version": 1, "ended_by": "idle",
            "capacity": 2, "shards": 1, "flush_interval_ms": 3_600_000,
            "requests": 9, "acks": 3, "mentions": 1, "gets": 5,
            "hits": 1, "misses": 8, "loaded": 4, "evictions": 6, "evicted_written": 4,
            "flushes": 1, "flushed_entries": 0,
            "bad_requests": 0, "store_errors": 0, "entries": 2,
            "store": {"keys": 3, "records_written": 4, "bytes": HEADER_LEN + 4 * RECORD_LEN as u64},
            "connections": 1, "connection_errors": 0,
        })
    );
}

/// Sharded: 4 shards of 3 entries. Which keys share a shard, and so which requests hit,
/// follows from the shard function, which both servers must compute alike; the answers do
/// not (evicted entries come back from the store), the counts do.
#[test]
fn sharded_eviction_follows_the_shard_function() {
    let counts = on_both(|server| {
        let p = server.start(&[
            "--capacity",
            "12",
            "--shards",
            "4",
            "--flush-interval",
            "1h",
            IDLE_EXIT[0],
            IDLE_EXIT[1],
        ]);
        let mut c = Client::connect(&p);
        let mut model = std::collections::HashMap::new();
        // A fixed pseudo-random walk over 32 keys.
        let mut x = 12_345u64;
        for i in 0..600u64 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let (user, channel) = ((x >> 33) % 16 + 1, (x >> 50) % 2 + 1);
            let state = model.entry((user, channel)).or_insert(rs(0, 0));
            let got = match i % 3 {
                0 => {
                    *state = rs(i, 0);
                    c.ack(user, channel, i)
                }
                1 => {
                    state.mentions += 1;
                    c.mention(user, channel)
                }
                _ => c.get(user, channel),
            };
            assert_eq!(got, *state, "{}: request {i}", server.build);
        }
        drop(c);
        idle_summary(p)
    });
    assert_eq!(counts["shards"], 4);
    assert_eq!(counts["requests"], 600);
    assert_eq!(counts["entries"], 12);
    // What the shard function gives (checked by the unit tests of both servers).
    assert_eq!(
        [
            &counts["hits"],
            &counts["misses"],
            &counts["evicted_written"]
        ],
        [&json!(HITS), &json!(600 - HITS), &json!(EVICTED_WRITTEN)]
    );
}

#[test]
fn malformed_requests_get_an_error_status() {
    let counts = on_both(|server| {
        let p = server.start(&IDLE_EXIT);
        let mut c = Client::connect(&p);
        let b = server.build;
        let error = |status: u8| {
            let mut r = [0u8; RESPONSE_LEN];
            r[..4].copy_from_slice(&13u32.to_le_bytes());
            r[4] = status;
            r
        };
        let frame = |len: u32, op: u8, extra: usize| {
            let mut f = len.to_le_bytes().to_vec();
            f.push(op);
            f.extend(std::iter::repeat_n(0xAB, extra));
            f
        };
        // Unknown op: the body is read and skipped, the connection stays usable.
        c.send_raw(&frame(17, 9, 16));
        assert_eq!(
            c.raw_response(),
            error(STATUS_UNKNOWN_OP),
            "{b}: unknown op"
        );
        // A get of the wrong length, and a mention with an ack's length.
        c.send_raw(&frame(9, OP_GET, 8));
        assert_eq!(c.raw_response(), error(STATUS_BAD_LENGTH), "{b}: short get");
        c.send_raw(&frame(25, OP_MENTION, 24));
        assert_eq!(
            c.raw_response(),
            error(STATUS_BAD_LENGTH),
            "{b}: long mention"
        );
        c.send_raw(&frame(17, OP_ACK, 16));
        assert_eq!(c.raw_response(), error(STATUS_BAD_LENGTH), "{b}: short ack");
        // An empty body.
        c.send_raw(&0u32.to_le_bytes());
        assert_eq!(
            c.raw_response(),
            error(STATUS_BAD_LENGTH),
            "{b}: empty body"
        );
        assert_eq!(c.get(1, 1), rs(0, 0), "{b}: still in step");
        // Too large: answered, then the connection is closed.
        c.send_raw(&100_000u32.to_le_bytes());
        assert_eq!(c.raw_response(), error(STATUS_BAD_LENGTH), "{b}: too large");
        let mut rest = Vec::new();
        c.stream.read_to_end(&mut rest).expect("end of stream");
        assert!(rest.is_empty(), "{b}: bytes after the last response");
        idle_summary(p)
    });
    assert_eq!(counts["bad_requests"], 6);
    assert_eq!(counts["requests"], 1);
    assert_eq!(counts["connection_errors"], 1);
}

/// A request with its trace context (`TRACED`) is answered as the same request without it; a
/// traced op is checked as a plain one, its length 24 bytes longer.
#[test]
fn traced_requests_get_the_answers_of_plain_ones() {
    let counts = on_both(|server| {
        let p = server.start(&IDLE_EXIT);
        let mut c = Client::connect(&p);
        let b = server.build;
        let key = Key::new(1, 1);
        let mut traced = |req: Request| {
            let mut wire = Vec::new();
            req.encode_traced(Some(TraceParent::nth(3, 4)), &mut wire);
            c.send_raw(&wire);
            c.response()
        };
        let ok = |state| Response {
            status: STATUS_OK,
            state,
        };
        assert_eq!(
            traced(Request::Ack { key, message_id: 5 }),
            ok(rs(5, 0)),
            "{b}: traced ack"
        );
        assert_eq!(
            traced(Request::Mention { key }),
            ok(rs(5, 1)),
            "{b}: traced mention"
        );
        assert_eq!(
            traced(Request::Get { key }),
            ok(rs(5, 1)),
            "{b}: traced get"
        );
        assert_eq!(c.get(1, 1), rs(5, 1), "{b}: plain get");
        let frame = |len: u32, op: u8| {
            let mut f = len.to_le_bytes().to_vec();
            f.push(op);
            f.extend(std::iter::repeat_n(0xAB, len as usize - 1));
            f
        };
        // A traced get without its context, and an unknown op traced.
        c.send_raw(&frame(17, OP_GET | TRACED));
        assert_eq!(
            c.response().status,
            STATUS_BAD_LENGTH,
            "{b}: traced get, no context"
        );
        c.send_raw(&frame(41, 9 | TRACED));
        assert_eq!(
            c.response().status,
            STATUS_UNKNOWN_OP,
            "{b}: traced unknown op"
        );
        assert_eq!(c.get(1, 1), rs(5, 1), "{b}: still in step");
        drop(c);
        idle_summary(p)
    });
    assert_eq!(counts["bad_requests"], 2);
    assert_eq!(counts["requests"], 5);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    on_both(|server| {
        let p = server.start(&IDLE_EXIT);
        let mut c = Client::connect(&p);
        let key = Key::new(3, 3);
        let mut wire = Vec::new();
        for _ in 0..100 {
            Request::Mention { key }.encode(&mut wire);
            Request::Get { key }.encode(&mut wire);
        }
        c.send_raw(&wire);
        for n in 1..=100 {
            for what in ["mention", "get"] {
                let r = c.response();
                assert_eq!(
                    (r.status, r.state),
                    (STATUS_OK, rs(0, n)),
                    "{} {what} {n}",
                    server.build
                );
            }
        }
        drop(c);
        idle_summary(p)
    });
}

#[test]
fn concurrent_mentions_on_one_key_all_count() {
    on_both(|server| {
        let p = server.start(&IDLE_EXIT);
        thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let mut c = Client::connect(&p);
                    for _ in 0..500 {
                        c.mention(4, 4);
                    }
                });
            }
        });
        let mut c = Client::connect(&p);
        assert_eq!(c.get(4, 4), rs(0, 2000), "{}", server.build);
        drop(c);
        let s = idle_summary(p);
        assert_eq!(s["connections"], 5);
        s
    });
}

/// The log file's size once `records` records are in it.
fn log_len(records: u64) -> u64 {
    HEADER_LEN + records * RECORD_LEN as u64
}

#[track_caller]
fn wait_for_log(path: &std::path::Path, len: u64, build: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = fs::metadata(path).map_or(0, |m| m.len());
        if now >= len {
            assert_eq!(now, len, "{build}: more records than dirty entries");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{build}: no flush pass wrote the dirty entries ({now} bytes of {len})"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_flush_interval_writes_dirty_entries() {
    for server in servers() {
        let b = server.build;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = server.start_in(dir.path(), &["--flush-interval", "100ms"]);
        let mut c = Client::connect(&p);
        c.ack(7, 7, 77);
        c.mention(7, 8);
        c.get(7, 9);
        // Two dirty entries; the get is clean and never written.
        wait_for_log(&dir.path().join(LOG_FILE), log_len(2), b);
        // Killed (dropping a running server kills it): no final pass, no summary.
        drop(c);
        drop(p);

        let p = server.start_in(
            dir.path(),
            &["--flush-interval", "1h", IDLE_EXIT[0], IDLE_EXIT[1]],
        );
        let mut c = Client::connect(&p);
        assert_eq!(c.get(7, 7), rs(77, 0), "{b}: flushed before the kill");
        assert_eq!(c.get(7, 8), rs(0, 1), "{b}: flushed before the kill");
        drop(c);
        let s = idle_summary(p);
        assert_eq!(s["loaded"], 2, "{b}: {s}");
        assert_eq!(s["flushed_entries"], 0, "{b}: {s}");
    }
}

#[test]
fn writes_are_behind_a_kill_loses_what_was_not_flushed() {
    for server in servers() {
        let b = server.build;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = server.start_in(dir.path(), &["--flush-interval", "1h"]);
        let mut c = Client::connect(&p);
        c.ack(7, 7, 77);
        drop(c);
        drop(p);
        assert_eq!(
            fs::metadata(dir.path().join(LOG_FILE)).expect("log").len(),
            log_len(0),
            "{b}: written through"
        );
        let p = server.start_in(dir.path(), &["--flush-interval", "1h"]);
        let mut c = Client::connect(&p);
        assert_eq!(c.get(7, 7), rs(0, 0), "{b}");
        drop(c);
        stop(p);
    }
}

/// A SIGTERM flushes; the data directory then opens in either server.
#[test]
fn each_build_reads_what_the_other_wrote() {
    let all = servers();
    for writer in &all {
        for reader in &all {
            let dir = tempfile::tempdir().expect("tempdir");
            let label = format!("{} → {}", writer.build, reader.build);
            let p = writer.start_in(dir.path(), &[]);
            let mut c = Client::connect(&p);
            c.ack(5, 5, 55);
            c.mention(5, 5);
            assert_eq!(c.mention(5, 5), rs(55, 2), "{label}");
            c.ack(5, 6, u64::MAX);
            drop(c);
            let s = stop(p);
            assert_eq!(s["ended_by"], "signal", "{label}: {s}");
            assert_eq!(s["flushed_entries"], 2, "{label}: {s}");

            let p = reader.start_in(dir.path(), &[]);
            let mut c = Client::connect(&p);
            assert_eq!(c.get(5, 5), rs(55, 2), "{label}");
            assert_eq!(c.get(5, 6), rs(u64::MAX, 0), "{label}");
            drop(c);
            let s = stop(p);
            assert_eq!(s["loaded"], 2, "{label}: {s}");
        }
    }
}

#[test]
fn a_torn_tail_is_cut_off_at_start() {
    for server in servers() {
        let b = server.build;
        let dir = tempfile::tempdir().expect("tempdir");
        let p = server.start_in(dir.path(), &[]);
        let mut c = Client::connect(&p);
        c.ack(1, 1, 1);
        drop(c);
        stop(p);
        let log = dir.path().join(LOG_FILE);
        let mut bytes = fs::read(&log).expect("log");
        bytes.extend_from_slice(&[0x55; 20]);
        fs::write(&log, &bytes).expect("write");

        let p = server.start_in(dir.path(), &[]);
        let mut c = Client::connect(&p);
        assert_eq!(c.get(1, 1), rs(1, 0), "{b}");
        drop(c);
        stop(p);
        assert_eq!(fs::metadata(&log).expect("log").len(), log_len(1), "{b}");
    }
}

#[test]
fn bad_settings_are_refused() {
    for server in servers() {
        for (args, needle) in [
            (&["--capacity", "0"][..], "capacity"),
            (&["--capacity", "2", "--shards", "3"][..], "shards"),
            (&["--flush-interval", "0s"][..], "flush-interval"),
        ] {
            let out = server.command().args(args).output().expect("run");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{} {args:?}: {stderr}",
                server.build
            );
            assert!(
                stderr.contains(needle),
                "{} {args:?}: {stderr}",
                server.build
            );
            assert!(
                !String::from_utf8_lossy(&out.stdout).contains("ready"),
                "{} {args:?}",
                server.build
            );
        }
    }
}

/// switchyard puts uprobes on the Go runtime (runtime.gcStart and friends): the binary must
/// keep its symbol table.
#[test]
fn the_go_binary_is_not_stripped() {
    let Some(go) = go_server() else { return };
    let bytes = fs::read(&go.program).expect("binary");
    let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    assert!(has(b".symtab\0"), "no .symtab section");
    assert!(has(b"runtime.gcStart\0"), "no runtime.gcStart symbol");
}
