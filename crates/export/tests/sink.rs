//! The sender's policy against endpoints that misbehave on purpose: a stand-in OTLP/HTTP
//! receiver on 127.0.0.1 answers each request with the next status of a script (or never
//! answers). Every run offered ends delivered or counted lost, and the recording's side never
//! waits on the network.

use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::{TcpListener, TcpStream},
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use prost::Message as _;
use switchyard_export::{Config, Exporter, Otlp, Protocol, otlp_request};
use switchyard_model::Run;

fn run() -> Run {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/data/basic.json");
    Run::load(&path).expect("the report's basic test run")
}

/// One request as the stand-in received it.
#[derive(Clone, Debug)]
struct Request {
    line: String,
    content_type: String,
    body: Vec<u8>,
}

/// What the stand-in answers, request after request; past the end of the script, 200.
#[derive(Clone, Copy)]
enum Answer {
    Status(u16),
    /// Read the request and never answer.
    Hang,
}

/// A stand-in receiver; returns its address and what it received so far.
fn standin(script: Vec<Answer>) -> (String, Arc<Mutex<Vec<Request>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&got);
    std::thread::spawn(move || {
        let mut script = script.into_iter();
        let mut hung = Vec::new();
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let mut reader = BufReader::new(stream);
            // Keep-alive: several requests may come on one connection.
            while let Some(request) = read_request(&mut reader) {
                seen.lock().unwrap().push(request);
                let status = match script.next().unwrap_or(Answer::Status(200)) {
                    Answer::Status(s) => s,
                    Answer::Hang => {
                        hung.push(reader);
                        break;
                    }
                };
                let answer = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n");
                if reader.get_mut().write_all(answer.as_bytes()).is_err() {
                    break;
                }
            }
        }
    });
    (base, got)
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let (mut length, mut content_type) = (0, String::new());
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim();
        if header.is_empty() {
            break;
        }
        let (k, v) = header.split_once(':')?;
        if k.eq_ignore_ascii_case("content-length") {
            length = v.trim().parse().ok()?;
        } else if k.eq_ignore_ascii_case("content-type") {
            content_type = v.trim().to_string();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        line: line.trim().to_string(),
        content_type,
        body,
    })
}

fn exporter(base: &str, queue: usize) -> Exporter {
    Exporter::start(Config {
        otlp: Some(Otlp::parse(base, Some(Protocol::Http)).unwrap()),
        pyroscope: None,
        queue,
    })
}

#[test]
fn a_receiver_failing_for_now_gets_the_run_once_it_takes_it() {
    // 503 and 429 are OTLP's "try again later".
    let (base, got) = standin(vec![Answer::Status(503), Answer::Status(429)]);
    let x = exporter(&base, 4);
    let run = run();
    x.send(run.clone());
    let stats = x.finish(Duration::from_secs(20));
    let s = &stats.sinks[0];
    assert_eq!(
        (s.offered, s.delivered, s.retries, s.lost()),
        (1, 1, 2, 0),
        "{s:?}"
    );
    let got = got.lock().unwrap();
    assert_eq!(got.len(), 3, "three attempts");
    for r in got.iter() {
        assert_eq!(r.line, "POST /v1development/profiles HTTP/1.1");
        assert_eq!(r.content_type, "application/x-protobuf");
        // Each attempt carries the same request, the run's own encoding.
        assert_eq!(r.body, otlp_request(&run).encode_to_vec());
    }
    assert_eq!(s.bytes, got[0].body.len() as u64);
    assert!(
        stats.lines()[0].contains("1 of 1 delivered") && stats.lines()[0].contains("2 retries"),
        "{:?}",
        stats.lines()
    );
}

#[test]
fn a_refusal_is_counted_once_and_not_retried() {
    let (base, got) = standin(vec![Answer::Status(400)]);
    let x = exporter(&base, 4);
    x.send(run());
    x.send(run());
    let stats = x.finish(Duration::from_secs(20));
    let s = &stats.sinks[0];
    assert_eq!(
        (s.offered, s.delivered, s.refused, s.retries, s.lost()),
        (2, 1, 1, 0, 1),
        "{s:?}"
    );
    assert_eq!(got.lock().unwrap().len(), 2, "one attempt per run");
    let line = &stats.lines()[0];
    assert!(
        line.contains("1 refused") && line.contains("last error: 400"),
        "{line}"
    );
}

#[test]
fn a_dead_receiver_costs_counted_runs_and_never_blocks_the_sender() {
    // A port nothing listens on.
    let base = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let x = exporter(&base, 2);
    let run = run();
    // More than the queue holds, offered at once: the queue keeps two, the thread one.
    for _ in 0..6 {
        x.send(run.clone());
    }
    let live = x.stats();
    assert_eq!(live.sinks[0].offered, 6);
    assert!(live.sinks[0].dropped_full >= 3, "{live:?}");
    let stats = x.finish(Duration::from_millis(700));
    let s = &stats.sinks[0];
    assert_eq!(s.delivered, 0, "{s:?}");
    assert!(s.retries >= 1, "refused connections are retried: {s:?}");
    assert_eq!(
        s.dropped_full + s.unsent,
        6,
        "every run dropped or unsent: {s:?}"
    );
    assert_eq!(stats.lost(), 6);
    let line = &stats.lines()[0];
    assert!(
        line.contains("dropped (queue full)") && line.contains("unsent at exit"),
        "{line}"
    );
}

#[test]
fn a_receiver_that_hangs_is_left_when_the_flush_runs_out() {
    // The receiver reads the request and never answers: the attempt would wait for its own
    // 10-s timeout; the end of the flush cuts it short.
    let (base, got) = standin(vec![Answer::Hang]);
    let x = exporter(&base, 4);
    x.send(run());
    while got.lock().unwrap().is_empty() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let begun = std::time::Instant::now();
    let stats = x.finish(Duration::from_millis(300));
    let waited = begun.elapsed();
    let s = &stats.sinks[0];
    assert_eq!((s.offered, s.delivered, s.unsent), (1, 0, 1), "{s:?}");
    // Not a timing figure: the bound is the attempt's own timeout, which must not be waited.
    assert!(
        waited < Duration::from_secs(9),
        "finish waited {waited:?} for a hung attempt"
    );
}
