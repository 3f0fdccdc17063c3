//! A process's published OpenTelemetry context (OTEP 4719): what it says it is, in a small
//! mapping a reader outside the process finds by name (`OTEL_CTX`). The mapping starts with a
//! 32-byte header; its payload is a `ProcessContext` protobuf message (a resource and extra
//! attributes). Reading it from a live process is the recorder's part; this is the format.

use opentelemetry_proto::tonic::{
    common::v1::{AnyValue, KeyValue, any_value},
    resource::v1::Resource,
};
use prost::Message as _;

/// The header's first 8 bytes.
pub const SIGNATURE: &[u8; 8] = b"OTEL_CTX";
/// The header's size: signature, version, payload size, publication time, payload address.
pub const HEADER_BYTES: usize = 32;
/// A payload larger than this is not read (the OpenTelemetry eBPF profiler's bound too).
pub const MAX_PAYLOAD: u32 = 64 * 1024;

/// `opentelemetry.proto.processcontext.v1development.ProcessContext`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessContext {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub attributes: Vec<KeyValue>,
}

/// The header's fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u32,
    pub payload_size: u32,
    /// CLOCK_BOOTTIME ns; 0 while the publisher is changing it.
    pub published_at_ns: u64,
    /// In the publisher's address space.
    pub payload_addr: u64,
}

/// The header, or why these bytes are not one.
pub fn header(b: &[u8]) -> Result<Header, String> {
    if b.len() < HEADER_BYTES || &b[..8] != SIGNATURE {
        return Err("no OTEL_CTX signature".into());
    }
    let u32_at = |i: usize| u32::from_ne_bytes(b[i..i + 4].try_into().unwrap_or_default());
    let u64_at = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap_or_default());
    let h = Header {
        version: u32_at(8),
        payload_size: u32_at(12),
        published_at_ns: u64_at(16),
        payload_addr: u64_at(24),
    };
    // Version 2 is the format; 1 is allowed for development.
    if !(1..=2).contains(&h.version) {
        return Err(format!("version {} (this reader knows 1 and 2)", h.version));
    }
    if h.payload_size == 0 || h.payload_size > MAX_PAYLOAD {
        return Err(format!("a payload of {} bytes", h.payload_size));
    }
    Ok(h)
}

/// The resource attributes of a payload, as `key = value` strings, in order.
pub fn resource(payload: &[u8]) -> Result<Vec<(String, String)>, String> {
    let c = ProcessContext::decode(payload).map_err(|e| format!("not a ProcessContext: {e}"))?;
    Ok(c.resource
        .map(|r| r.attributes)
        .unwrap_or_default()
        .into_iter()
        .map(|kv| (kv.key, kv.value.map(value).unwrap_or_default()))
        .collect())
}

/// An attribute's value as text.
fn value(v: AnyValue) -> String {
    match v.value {
        Some(any_value::Value::StringValue(s)) => s,
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(any_value::Value::ArrayValue(a)) => {
            let items: Vec<String> = a.values.into_iter().map(value).collect();
            format!("[{}]", items.join(","))
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(k: &str, v: any_value::Value) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: Some(AnyValue { value: Some(v) }),
            ..Default::default()
        }
    }

    #[test]
    fn a_payload_and_its_header() {
        let c = ProcessContext {
            resource: Some(Resource {
                attributes: vec![
                    kv(
                        "service.name",
                        any_value::Value::StringValue("checkout".into()),
                    ),
                    kv("service.port", any_value::Value::IntValue(8080)),
                ],
                ..Default::default()
            }),
            attributes: vec![kv(
                "threadlocal.schema_version",
                any_value::Value::StringValue("tls_v1".into()),
            )],
        };
        let r = resource(&c.encode_to_vec()).unwrap();
        assert_eq!(
            r,
            vec![
                ("service.name".to_string(), "checkout".to_string()),
                ("service.port".to_string(), "8080".to_string()),
            ]
        );
        assert!(resource(b"\xff\xff\xff").is_err());

        let mut h = Vec::from(&SIGNATURE[..]);
        h.extend(2u32.to_ne_bytes());
        h.extend(40u32.to_ne_bytes());
        h.extend(7u64.to_ne_bytes());
        h.extend(0x7f00_0000_1000u64.to_ne_bytes());
        assert_eq!(
            header(&h),
            Ok(Header {
                version: 2,
                payload_size: 40,
                published_at_ns: 7,
                payload_addr: 0x7f00_0000_1000
            })
        );
        let mut bad = h.clone();
        bad[0] = b'X';
        assert!(header(&bad).unwrap_err().contains("signature"));
        let mut v3 = h.clone();
        v3[8] = 3;
        assert!(header(&v3).unwrap_err().contains("version 3"));
        let mut huge = h.clone();
        huge[12..16].copy_from_slice(&(1u32 << 20).to_ne_bytes());
        assert!(header(&huge).unwrap_err().contains("payload"));
        assert!(header(&h[..20]).is_err());
    }
}
