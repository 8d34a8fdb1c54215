//! An OTLP/HTTP trace receiver on loopback, as a collector is: it takes `POST /v1/traces`
//! (protobuf, kept-alive connections), decodes each export with opentelemetry-proto's own
//! types, and keeps the spans for a test to read.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    sync::{Arc, Mutex},
};

use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::{AnyValue, any_value::Value},
};
use prost::Message;

/// One span as exported.
#[derive(Clone, Debug)]
pub struct ReceivedSpan {
    /// Hex, as W3C `traceparent` writes it.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    pub attributes: BTreeMap<String, String>,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// The receiver; it serves until the test process ends.
pub struct OtlpReceiver {
    /// `http://127.0.0.1:PORT`, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
}

impl OtlpReceiver {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the OTLP receiver");
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = spans.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let kept = kept.clone();
                std::thread::spawn(move || serve_connection(stream, &kept));
            }
        });
        OtlpReceiver { endpoint, spans }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap().clone()
    }

    /// The environment that makes the binary export here, promptly.
    pub fn env(&self) -> [(&'static str, String); 3] {
        [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", self.endpoint.clone()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".to_owned()),
            // The batch processor's delay: spans reach the test within a fraction of a second.
            ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
        ]
    }
}

/// Answers the requests of one kept-alive connection until the client closes it.
fn serve_connection(stream: TcpStream, spans: &Mutex<Vec<ReceivedSpan>>) {
    let Ok(reading) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(reading);
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let status = if request_line.starts_with("POST /v1/traces ") {
            match ExportTraceServiceRequest::decode(body.as_slice()) {
                Ok(export) => {
                    spans.lock().unwrap().extend(decoded(export));
                    "200 OK"
                }
                Err(_) => "400 Bad Request",
            }
        } else {
            "404 Not Found"
        };
        let answer = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
        );
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn decoded(export: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut out = Vec::new();
    for resource in export.resource_spans {
        for scope in resource.scope_spans {
            for span in scope.spans {
                out.push(ReceivedSpan {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    name: span.name,
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
                        .collect(),
                });
            }
        }
    }
    out
}
