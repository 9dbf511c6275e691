//! Test support: a tiny OTLP/HTTP receiver on 127.0.0.1 (POST `/v1/traces`, `/v1/metrics`)
//! and readers of what it received, decoded with the official OTLP protobuf definitions
//! (`opentelemetry-proto`'s prost messages).
#![allow(dead_code)]

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{Metric, metric};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// One received request: its path and body.
pub type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// An OTLP/HTTP receiver on a listener: answers every POST with `200` and an empty body and
/// keeps what it received.
pub struct Receiver {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// Every request: its path and body.
    pub received: Received,
}

impl Receiver {
    pub fn start() -> Self {
        Self::on(TcpListener::bind("127.0.0.1:0").expect("bind"))
    }

    pub fn on(listener: TcpListener) -> Self {
        let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
        let received: Received = Arc::default();
        let keep = received.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                // Recorded before the answer: the exporting process may exit as soon as it has
                // its 200, and the test reads what was received right after.
                if let Some(request) = read_request(&mut stream) {
                    keep.lock().expect("lock").push(request);
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                }
            }
        });
        Self { endpoint, received }
    }

    pub fn bodies(&self, path: &str) -> Vec<Vec<u8>> {
        self.received
            .lock()
            .expect("lock")
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, b)| b.clone())
            .collect()
    }

    pub fn spans(&self) -> (Vec<Span>, Vec<KeyValue>) {
        let mut spans = Vec::new();
        let mut resource = Vec::new();
        for body in self.bodies("/v1/traces") {
            let request = ExportTraceServiceRequest::decode(body.as_slice()).expect("OTLP traces");
            for rs in request.resource_spans {
                resource = rs.resource.map(|r| r.attributes).unwrap_or_default();
                for ss in rs.scope_spans {
                    spans.extend(ss.spans);
                }
            }
        }
        (spans, resource)
    }

    /// The last export of every metric, by name (the SDK exports cumulative sums).
    pub fn metrics(&self) -> BTreeMap<String, Metric> {
        let mut metrics = BTreeMap::new();
        for body in self.bodies("/v1/metrics") {
            let request =
                ExportMetricsServiceRequest::decode(body.as_slice()).expect("OTLP metrics");
            for rm in request.resource_metrics {
                for sm in rm.scope_metrics {
                    for m in sm.metrics {
                        metrics.insert(m.name.clone(), m);
                    }
                }
            }
        }
        metrics
    }

    pub fn raw(&self) -> Vec<u8> {
        self.received
            .lock()
            .expect("lock")
            .iter()
            .flat_map(|(_, b)| b.clone())
            .collect()
    }
}

fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let (head_end, length) = loop {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while raw.len() < head_end + length {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let path = head.split(' ').nth(1)?.to_owned();
    Some((
        path,
        raw[head_end..head_end + length.min(raw.len() - head_end)].to_vec(),
    ))
}

pub fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

pub fn str_attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match attr(attrs, key) {
        Some(any_value::Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

pub fn int_attr(attrs: &[KeyValue], key: &str) -> Option<i64> {
    match attr(attrs, key) {
        Some(any_value::Value::IntValue(i)) => Some(*i),
        _ => None,
    }
}

/// Sum of a counter's points whose attributes include `filter`.
pub fn sum(metrics: &BTreeMap<String, Metric>, name: &str, filter: &[(&str, &str)]) -> u64 {
    let m = metrics
        .get(name)
        .unwrap_or_else(|| panic!("metric {name} not received: {:?}", metrics.keys()));
    let Some(metric::Data::Sum(s)) = &m.data else {
        panic!("{name} is not a sum");
    };
    s.data_points
        .iter()
        .filter(|p| {
            filter
                .iter()
                .all(|(k, v)| str_attr(&p.attributes, k) == Some(v))
        })
        .map(|p| match p.value {
            Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(i)) => {
                u64::try_from(i).expect("non-negative")
            }
            _ => panic!("{name}: not an integer point"),
        })
        .sum()
}

/// (count, sum) of a histogram's points whose attributes include `filter`.
pub fn histogram(
    metrics: &BTreeMap<String, Metric>,
    name: &str,
    filter: &[(&str, &str)],
) -> (u64, f64) {
    let m = metrics
        .get(name)
        .unwrap_or_else(|| panic!("metric {name} not received: {:?}", metrics.keys()));
    let Some(metric::Data::Histogram(h)) = &m.data else {
        panic!("{name} is not a histogram");
    };
    h.data_points
        .iter()
        .filter(|p| {
            filter
                .iter()
                .all(|(k, v)| str_attr(&p.attributes, k) == Some(v))
        })
        .fold((0, 0.0), |(c, s), p| {
            (c + p.count, s + p.sum.unwrap_or(0.0))
        })
}

/// The standard OTel environment pointing at `receiver`.
pub fn otel_env(receiver: &Receiver) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint.clone()),
        ("OTEL_SERVICE_NAME", "dpone-otlp-test".to_owned()),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=otlp-test".to_owned(),
        ),
    ]
}
