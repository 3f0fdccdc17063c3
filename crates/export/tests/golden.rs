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

/// The resource in the semantic conventions' names, with what the environment adds: its
/// `service.name` below `--service`, a secret key's value redacted, and `--no-redact` said.
#[test]
fn the_resource_and_what_the_environment_adds() {
    let mut run =
        Run::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../report/tests/data/basic.json"))
            .unwrap();
    run.meta.process = switchyard_model::ProcessInfo {
        executable: "/usr/local/bin/server".into(),
        runtime: "go".into(),
        runtime_version: "go1.26.8".into(),
        ..Default::default()
    };
    let extra = [
        ("service.name".to_string(), "from-env".to_string()),
        (
            "deployment.environment.name".to_string(),
            "prod".to_string(),
        ),
        ("db.password".to_string(), "hunter2".to_string()),
    ];
    let golden = Golden::new(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data"),
        "cargo test -p switchyard-export --test golden",
    );
    let lines = |run: &Run| {
        let request = switchyard_export::otlp_request_with(run, &extra);
        let resource = request.resource_profiles[0].resource.clone().unwrap();
        resource
            .attributes
            .iter()
            .map(|kv| {
                format!(
                    "{} = {:?}\n",
                    kv.key,
                    kv.value.as_ref().unwrap().value.as_ref().unwrap()
                )
            })
            .collect::<String>()
    };
    let mut text = String::from("# the environment's service.name, as no --service was given\n");
    text += &lines(&run);
    run.meta.labels.insert("service".into(), "from-flag".into());
    run.meta.redaction.off = true;
    text += "# --service from-flag, recorded with --no-redact\n";
    text += &lines(&run);
    run.meta.labels.clear();
    run.meta.redaction.off = false;
    run.meta.process.published = [
        ("service.name", "published"),
        ("deployment.environment.name", "staging"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    text += "# a published process context, over the environment\n";
    text += &lines(&run);
    golden.check("basic.resource.txt", &text);
}
