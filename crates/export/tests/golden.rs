//! Golden tests of what is sent: the OTLP request of the report's basic run, in OTLP/JSON
//! (the protocol's own JSON mapping), and the Pyroscope push's name. `SWITCHYARD_BLESS=1`
//! rewrites the expectations.

use std::path::Path;

use switchyard_export::{ingest_name, otlp_request};
use switchyard_golden::Golden;
use switchyard_model::Run;

#[test]
fn the_otlp_request_and_the_pyroscope_name_of_a_known_run() {
    let run =
        Run::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/data/basic.json"))
            .unwrap();
    let golden = Golden::new(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data"),
        "cargo test -p switchyard-export --test golden",
    );
    let request = otlp_request(&run);
    let mut json = serde_json::to_string_pretty(&request).unwrap();
    json.push('\n');
    golden.check("basic.otlp.json", &json);
    golden.check(
        "basic.pyroscope-name.txt",
        &format!("{}\n", ingest_name(&run)),
    );
}
