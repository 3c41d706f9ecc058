//! The `/metrics` endpoint as an HTTP server: HEAD works, only `/metrics` answers, a silent or
//! slow client cannot hold it, every exported family has HELP and TYPE lines, and the process
//! metrics are there.

use std::collections::BTreeSet;
use std::time::Duration;

use gregor_integration::prom::{http_get, parse};
use gregor_integration::{GregorNode, KafkaConn};
use kafka_protocol::messages::ApiVersionsRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends `request` as is and reads until the server closes the connection.
async fn raw_http(addr: &str, request: &str) -> String {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.unwrap();
        String::from_utf8(raw).unwrap()
    };
    tokio::time::timeout(IO_TIMEOUT, exchange).await.unwrap()
}

fn header<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    response.split("\r\n\r\n").next()?.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

#[tokio::test]
async fn head_wrong_paths_and_methods() {
    let node = GregorNode::start(&[]).unwrap();
    let addr = node.metrics_addr();

    let head = raw_http(
        &addr,
        "HEAD /metrics HTTP/1.1\r\nHost: gregor\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    let length: usize = header(&head, "content-length").unwrap().parse().unwrap();
    assert!(length > 0, "{head}");
    assert!(head.ends_with("\r\n\r\n"), "HEAD has no body: {head}");
    assert!(header(&head, "content-type")
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));

    for path in [
        "/",
        "/metrics/",
        "/metricsx",
        "/favicon.ico",
        "/debug/pprof",
    ] {
        let response = http_get(&addr, path).await.unwrap();
        assert_eq!(response.status, 404, "GET {path}");
    }
    let with_query = http_get(&addr, "/metrics?name[]=x").await.unwrap();
    assert_eq!(with_query.status, 200, "a query string is ignored");

    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        let response = raw_http(
            &addr,
            &format!("{method} /metrics HTTP/1.1\r\nHost: gregor\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(
            response.starts_with("HTTP/1.1 405 "),
            "{method}: {response}"
        );
        assert_eq!(header(&response, "allow"), Some("GET, HEAD"), "{method}");
    }

    let garbage = raw_http(&addr, "\x16\x03\x01\x00\x25 not http\r\n\r\n").await;
    assert!(
        garbage.is_empty() || garbage.starts_with("HTTP/1.1 400"),
        "{garbage}"
    );
}

#[tokio::test]
async fn a_silent_client_does_not_hold_the_endpoint() {
    let node = GregorNode::start(&[]).unwrap();
    let addr = node.metrics_addr();
    // One client that connects and says nothing, one that stops half-way through its request.
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    let mut partial = TcpStream::connect(&addr).await.unwrap();
    partial.write_all(b"GET /metr").await.unwrap();

    let scrape = http_get(&addr, "/metrics").await.unwrap();
    assert_eq!(scrape.status, 200, "a scrape beside stalled clients");

    // The server gives up on both on its own (the header read timeout), without a byte from them.
    for stream in [&mut silent, &mut partial] {
        let mut buf = Vec::new();
        let closed = tokio::time::timeout(IO_TIMEOUT, stream.read_to_end(&mut buf)).await;
        assert!(closed.is_ok(), "the server kept a stalled connection open");
    }
}

#[tokio::test]
async fn every_family_has_help_and_type_and_process_metrics_are_there() {
    let node = GregorNode::start(&[]).unwrap();
    // Some traffic so request, connection and quota series exist.
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.send::<ApiVersionsRequest>(&ApiVersionsRequest::default(), 0)
        .await
        .unwrap();
    let body = http_get(&node.metrics_addr(), "/metrics")
        .await
        .unwrap()
        .body;

    let declared = |prefix: &str| -> BTreeSet<String> {
        body.lines()
            .filter_map(|line| line.strip_prefix(prefix))
            .filter_map(|rest| rest.split_whitespace().next())
            .map(str::to_owned)
            .collect()
    };
    let help = declared("# HELP ");
    let types = declared("# TYPE ");
    let samples = parse(&body).unwrap();
    assert!(samples.len() > 20, "{body}");
    let mut missing = Vec::new();
    for sample in &samples {
        let family = [&sample.name]
            .into_iter()
            .map(String::as_str)
            .chain(
                ["_bucket", "_sum", "_count"]
                    .iter()
                    .filter_map(|suffix| sample.name.strip_suffix(suffix)),
            )
            .find(|name| types.contains(*name));
        match family {
            Some(family) if help.contains(family) => {}
            Some(family) => missing.push(format!("{family}: no HELP")),
            None => missing.push(format!("{}: no TYPE", sample.name)),
        }
    }
    missing.dedup();
    assert!(missing.is_empty(), "{missing:#?}\n{body}");

    for name in [
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
        "process_threads",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
    ] {
        let sample = samples
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} missing\n{body}"));
        // A young process may not have used a whole CPU tick yet; everything else is positive.
        let floor_ok = if name == "process_cpu_seconds_total" {
            sample.value >= 0.0
        } else {
            sample.value > 0.0
        };
        assert!(floor_ok, "{name} = {}", sample.value);
    }
    assert!(
        samples.iter().any(|s| s.name == "gregor_build_info"
            && s.labels.get("version").map(String::as_str) == Some(env!("CARGO_PKG_VERSION"))),
        "{body}"
    );
}
