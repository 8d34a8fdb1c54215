//! With `OTEL_EXPORTER_OTLP_ENDPOINT` set, the binary exports its spans over OTLP/HTTP. The
//! receiver here is a minimal OTLP/HTTP collector on loopback: it accepts `POST /v1/traces` and
//! answers with an empty (valid) protobuf `ExportTraceServiceResponse`.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpListener,
    sync::mpsc,
    time::Duration,
};

use gpustack_tests::{operator, stderr};

struct Received {
    request_line: String,
    content_type: String,
    body: Vec<u8>,
}

/// Accepts one request on `listener` and sends what it carried.
fn serve_one(listener: TcpListener, tx: mpsc::Sender<Received>) {
    let (stream, _) = listener.accept().expect("accept");
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let (mut length, mut content_type) = (0usize, String::new());
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or((header, ""));
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap(),
            "content-type" => content_type = value.trim().to_owned(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let mut stream = stream;
    stream
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .unwrap();
    let _ = tx.send(Received {
        request_line,
        content_type,
        body,
    });
}

#[test]
fn spans_reach_an_otlp_receiver() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || serve_one(listener, tx));

    // Any command opens the root `command` span; one that fails fast keeps the test quick: a
    // gateway whose data directory is a file.
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, "").unwrap();
    let out = operator()
        .args([
            "worker-gateway",
            "-v=1",
            "--bind-unix-path=",
            &format!("--data-dir={}", not_a_dir.display()),
        ])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));

    let got = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("no OTLP export arrived within 20s");
    assert!(
        got.request_line.starts_with("POST /v1/traces "),
        "{}",
        got.request_line
    );
    assert_eq!(got.content_type, "application/x-protobuf");
    // Protobuf carries strings as raw UTF-8: the span name, its attribute and the service name.
    let body = String::from_utf8_lossy(&got.body);
    for expected in ["command", "worker-gateway", "gpustack-operator"] {
        assert!(body.contains(expected), "export lacks {expected:?}");
    }
}
