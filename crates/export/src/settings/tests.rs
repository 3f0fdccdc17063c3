use std::collections::HashMap;

use super::*;

/// An environment of these variables only.
fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name: &str| map.get(name).cloned()
}

fn flags(endpoint: Option<&str>) -> Flags {
    Flags {
        endpoint: endpoint.map(str::to_string),
        ..Default::default()
    }
}

fn resolve(f: &Flags, vars: &[(&str, &str)]) -> Result<Option<Otlp>, Refused> {
    otlp(f, &env(vars))
}

fn ok(f: &Flags, vars: &[(&str, &str)]) -> Otlp {
    resolve(f, vars).unwrap().unwrap()
}

fn refused(f: &Flags, vars: &[(&str, &str)]) -> Refused {
    resolve(f, vars).unwrap_err()
}

#[test]
fn nothing_set_is_no_sink() {
    assert_eq!(resolve(&Flags::default(), &[]).unwrap(), None);
    // Blank is unset, as the SDKs read it.
    assert_eq!(
        resolve(&Flags::default(), &[("OTEL_EXPORTER_OTLP_ENDPOINT", "  ")]).unwrap(),
        None
    );
}

#[test]
fn the_generic_endpoint_gets_the_signal_path_and_the_signal_endpoint_is_used_as_it_is() {
    let o = ok(
        &Flags::default(),
        &[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "https://collector.example:4318",
        )],
    );
    assert_eq!(o.base, "https://collector.example:4318");
    assert_eq!(o.path, "/v1development/profiles");
    assert_eq!(o.protocol, Protocol::Http);
    assert_eq!(o.from, "OTEL_EXPORTER_OTLP_ENDPOINT");
    assert!(o.tls.is_some());
    assert_eq!(o.timeout, DEFAULT_TIMEOUT);
    // A base with a path keeps it, below which the signal's goes.
    let o = ok(
        &Flags::default(),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://gw:8080/otlp/")],
    );
    assert_eq!(
        (o.base.as_str(), o.path.as_str()),
        ("http://gw:8080", "/otlp/v1development/profiles")
    );
    let o = ok(
        &Flags::default(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:1"),
            (
                "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT",
                "http://127.0.0.1:9999/custom/in",
            ),
        ],
    );
    assert_eq!(
        (o.base.as_str(), o.path.as_str()),
        ("http://127.0.0.1:9999", "/custom/in")
    );
    assert_eq!(o.from, "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT");
}

#[test]
fn a_flag_is_over_the_variables_and_the_signal_over_the_generic() {
    let vars = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://from-env:4318"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL", "http/protobuf"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "1000"),
        ("OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT", "2500"),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer%20generic,x-tenant=a",
        ),
        (
            "OTEL_EXPORTER_OTLP_PROFILES_HEADERS",
            "Authorization=Bearer%20signal",
        ),
    ];
    let o = ok(&Flags::default(), &vars);
    assert_eq!(o.base, "http://from-env:4318");
    assert_eq!(o.protocol, Protocol::Http, "the signal's protocol wins");
    assert_eq!(o.timeout, Duration::from_millis(2500));
    assert_eq!(
        o.headers,
        vec![
            ("Authorization".to_string(), "Bearer signal".to_string()),
            ("x-tenant".to_string(), "a".to_string()),
        ]
    );
    let f = Flags {
        endpoint: Some("grpc://from-flag:4317".into()),
        protocol: None,
        headers: vec!["X-Tenant=b".into()],
    };
    let o = ok(&f, &vars);
    assert_eq!(o.base, "http://from-flag:4317");
    assert_eq!(o.protocol, Protocol::Grpc, "grpc:// is the flag's own word");
    assert_eq!(o.from, "--otlp");
    assert_eq!(o.headers[1], ("X-Tenant".to_string(), "b".to_string()));
    let f = Flags {
        protocol: Some(Protocol::Grpc),
        ..flags(Some("http://from-flag:4318"))
    };
    assert_eq!(ok(&f, &vars).protocol, Protocol::Grpc);
}

#[test]
fn the_port_decides_only_when_nothing_says() {
    assert_eq!(
        ok(&flags(Some("http://h:4317")), &[]).protocol,
        Protocol::Grpc
    );
    assert_eq!(
        ok(&flags(Some("http://h:4318")), &[]).protocol,
        Protocol::Http
    );
    let o = ok(
        &flags(Some("http://h:4317")),
        &[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")],
    );
    assert_eq!(o.protocol, Protocol::Http);
    assert_eq!(o.path, "/v1development/profiles");
    // gRPC takes no path.
    assert_eq!(ok(&flags(Some("grpc://h:4317")), &[]).path, "");
}

#[test]
fn compression_is_gzip_or_none() {
    let o = ok(
        &Flags::default(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
        ],
    );
    assert!(o.gzip);
    let r = refused(
        &Flags::default(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            ("OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION", "zstd"),
        ],
    );
    assert_eq!(r.setting, "OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION");
    assert!(r.problem.contains("zstd"), "{r}");
}

/// Each malformed value is refused with the variable's name, and never echoes a header's
/// value (it may be the credential).
#[test]
fn malformed_values_are_refused_by_name() {
    let base = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318");
    let cases: &[(&str, &str, &str)] = &[
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization",
            "entry 1: not key=value",
        ),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "a=1,=secret-value",
            "entry 2: the key is not a header name",
        ),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "bad key=1",
            "the key is not a header name",
        ),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x=%zz", "not percent-encoded"),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "x=%ff%fe",
            "not percent-encoded UTF-8",
        ),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "x=line%0Abreak",
            "control character",
        ),
        (
            "OTEL_EXPORTER_OTLP_PROFILES_HEADERS",
            "x=%",
            "not percent-encoded",
        ),
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "http/json",
            "http/json is not supported",
        ),
        (
            "OTEL_EXPORTER_OTLP_PROTOCOL",
            "udp",
            "unknown protocol `udp`",
        ),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s", "not a timeout"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "0", "not a timeout"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "-5", "not a timeout"),
    ];
    for (name, value, problem) in cases {
        let r = refused(&Flags::default(), &[base, (name, value)]);
        assert_eq!(&r.setting, name, "{value}");
        assert!(r.problem.contains(problem), "{name}={value}: {r}");
        assert!(!r.to_string().contains("secret-value"), "{r}");
        assert!(!r.hint.is_empty());
    }
    let endpoints: &[(&str, &str)] = &[
        ("ftp://h:21", "unknown scheme `ftp`"),
        ("h:port", "not a URL"),
        ("http:/h:4318", "no scheme"),
        ("h:4317/v1/x", "no scheme"),
        ("http://", "empty host"),
        ("http://user:pw@h:4318", "holds credentials"),
        ("http://h:99999", "invalid port"),
    ];
    for (url, problem) in endpoints {
        let r = refused(&Flags::default(), &[("OTEL_EXPORTER_OTLP_ENDPOINT", url)]);
        assert_eq!(r.setting, "OTEL_EXPORTER_OTLP_ENDPOINT");
        assert!(r.problem.contains(problem), "{url}: {r}");
        assert!(!r.problem.contains("pw"), "{r}");
    }
    let r = refused(&flags(Some("http://h:4318/v1development/profiles")), &[]);
    assert_eq!(r.setting, "--otlp");
    assert!(r.problem.contains("without a path"), "{r}");
    let r = refused(
        &Flags {
            headers: vec!["novalue".into()],
            ..flags(Some("http://h:4318"))
        },
        &[],
    );
    assert_eq!(r.setting, "--otlp-header");
    let r = refused(
        &Flags {
            protocol: Some(Protocol::Grpc),
            ..Flags::default()
        },
        &[],
    );
    assert_eq!(r.setting, "--otlp-protocol");
}

#[test]
fn headers_decode_and_skip_blank_entries() {
    let h = header_list(
        "V",
        " authorization = Bearer%20abc%3D%3D , ,x-scope-orgid=tenant%2C1,empty=",
    )
    .unwrap();
    assert_eq!(
        h,
        vec![
            ("authorization".to_string(), "Bearer abc==".to_string()),
            ("x-scope-orgid".to_string(), "tenant,1".to_string()),
            ("empty".to_string(), String::new()),
        ]
    );
    // A value may hold `=`: only the first one splits.
    assert_eq!(header_list("V", "k=a=b").unwrap()[0].1, "a=b");
}

#[test]
fn certificate_files_are_read_and_checked_before_the_recording() {
    let dir = std::env::temp_dir().join(format!("switchyard-settings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_pem = dir.join("not.pem");
    std::fs::write(&not_pem, "hello").unwrap();
    let broken = dir.join("broken.pem");
    std::fs::write(
        &broken,
        "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let https = ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://h:4318");
    let missing = dir.join("missing.pem");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
            missing.display().to_string(),
            "cannot read",
        ),
        (
            "OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE",
            not_pem.display().to_string(),
            "holds no PEM",
        ),
        (
            "OTEL_EXPORTER_OTLP_CERTIFICATE",
            broken.display().to_string(),
            "CA",
        ),
        (
            "OTEL_EXPORTER_OTLP_CLIENT_KEY",
            not_pem.display().to_string(),
            "holds no PEM a private key",
        ),
    ];
    for (name, path, problem) in &cases {
        let r = refused(&Flags::default(), &[https, (name, path)]);
        assert_eq!(&r.setting, name, "{r}");
        assert!(r.problem.contains(problem), "{name}: {r}");
    }
    // Over plain http they are not used, so not read.
    let o = ok(
        &Flags::default(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            (
                "OTEL_EXPORTER_OTLP_CERTIFICATE",
                &missing.display().to_string(),
            ),
        ],
    );
    assert!(o.tls.is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_resource_from_the_environment() {
    let r = resource(&env(&[
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "service.name=from-attrs, deployment.environment.name=prod,team=a%2Cb,,service.version=1.2",
        ),
        ("OTEL_SERVICE_NAME", "checkout"),
    ]))
    .unwrap();
    assert_eq!(
        r,
        vec![
            ("service.name".to_string(), "checkout".to_string()),
            (
                "deployment.environment.name".to_string(),
                "prod".to_string()
            ),
            ("team".to_string(), "a,b".to_string()),
            ("service.version".to_string(), "1.2".to_string()),
        ]
    );
    let e = resource(&env(&[("OTEL_RESOURCE_ATTRIBUTES", "a=1,oops")])).unwrap_err();
    assert_eq!(e.setting, "OTEL_RESOURCE_ATTRIBUTES");
    assert!(e.problem.contains("entry 2"), "{e}");
    let e = resource(&env(&[("OTEL_RESOURCE_ATTRIBUTES", "=1")])).unwrap_err();
    assert!(e.problem.contains("no key"), "{e}");
}

#[test]
fn debug_output_leaves_header_values_out() {
    let o = ok(
        &Flags::default(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20sekrit",
            ),
        ],
    );
    let d = format!("{o:?}");
    assert!(d.contains("authorization") && !d.contains("sekrit"), "{d}");
    assert!(!o.describe().contains("sekrit"));
}

#[test]
fn a_grpc_endpoint_without_a_scheme_is_tls_unless_insecure() {
    let generic = ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector.example:4317");
    let o = ok(&Flags::default(), &[generic]);
    assert_eq!(o.protocol, Protocol::Grpc);
    assert_eq!(o.base, "https://collector.example:4317");
    assert!(o.tls.is_some());
    // Without a port, gRPC's.
    let o = ok(
        &Flags::default(),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector.example")],
    );
    assert_eq!(o.base, "https://collector.example:4317");
    for (vars, plaintext) in [
        (vec![generic, ("OTEL_EXPORTER_OTLP_INSECURE", "true")], true),
        (
            vec![generic, ("OTEL_EXPORTER_OTLP_INSECURE", "FALSE")],
            false,
        ),
        // The signal's over the generic.
        (
            vec![
                generic,
                ("OTEL_EXPORTER_OTLP_INSECURE", "false"),
                ("OTEL_EXPORTER_OTLP_PROFILES_INSECURE", "true"),
            ],
            true,
        ),
    ] {
        let o = ok(&Flags::default(), &vars);
        assert_eq!(o.tls.is_none(), plaintext, "{vars:?}");
        let scheme = if plaintext { "http" } else { "https" };
        assert_eq!(o.base, format!("{scheme}://collector.example:4317"));
        assert_eq!(o.protocol, Protocol::Grpc);
    }
    // A scheme says it all: INSECURE is only for an endpoint without one.
    let o = ok(
        &Flags::default(),
        &[
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "https://collector.example:4318",
            ),
            ("OTEL_EXPORTER_OTLP_INSECURE", "true"),
        ],
    );
    assert!(o.tls.is_some());
    // Anything but true or false, and an http/protobuf endpoint without its scheme.
    let r = refused(
        &Flags::default(),
        &[generic, ("OTEL_EXPORTER_OTLP_INSECURE", "yes")],
    );
    assert_eq!(r.setting, "OTEL_EXPORTER_OTLP_INSECURE");
    assert!(r.problem.contains("neither true nor false"), "{r:?}");
    let r = refused(
        &Flags::default(),
        &[generic, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")],
    );
    assert_eq!(r.setting, "OTEL_EXPORTER_OTLP_ENDPOINT");
    assert!(r.problem.contains("needs its scheme"), "{r:?}");
}
