//! Scraping and reading Prometheus text exposition, with a raw HTTP/1.0 GET over tokio (no HTTP
//! client dependency).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One sample line: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name including any `_total`, `_count`, `_sum`, `_bucket` suffix.
    pub name: String,
    /// Label pairs.
    pub labels: BTreeMap<String, String>,
    /// The value.
    pub value: f64,
}

/// An HTTP response as read off the wire.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Header names lower-cased.
    pub headers: BTreeMap<String, String>,
    /// Body (de-chunked).
    pub body: String,
}

/// `GET path` from `addr` (`host:port`) with HTTP/1.0 semantics (the server closes after the
/// response).
pub async fn http_get(addr: &str, path: &str) -> anyhow::Result<HttpResponse> {
    let fut = async {
        let mut stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        let request =
            format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        parse_http(&raw)
    };
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .map_err(|_| anyhow!("GET http://{addr}{path} timed out"))?
}

fn parse_http(raw: &[u8]) -> anyhow::Result<HttpResponse> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("no end of HTTP headers in {} bytes", raw.len()))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("bad status line {status_line:?}"))?;
    let mut headers = BTreeMap::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut body = raw[split + 4..].to_vec();
    if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        body = dechunk(&body)?;
    }
    Ok(HttpResponse {
        status,
        headers,
        body: String::from_utf8(body).context("metrics body is not UTF-8")?,
    })
}

fn dechunk(mut data: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| anyhow!("bad chunk"))?;
        let size_str = String::from_utf8_lossy(&data[..eol]);
        let size = usize::from_str_radix(size_str.split(';').next().unwrap_or("").trim(), 16)
            .with_context(|| format!("bad chunk size {size_str:?}"))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            bail!("truncated chunk");
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// Scrapes `http://addr/metrics` and returns the body; fails on a non-200 status.
pub async fn scrape(addr: &str) -> anyhow::Result<String> {
    let resp = http_get(addr, "/metrics").await?;
    if resp.status != 200 {
        bail!("GET /metrics returned {}: {}", resp.status, resp.body);
    }
    Ok(resp.body)
}

/// Parses exposition text into samples (comments skipped).
pub fn parse(text: &str) -> anyhow::Result<Vec<Sample>> {
    let mut samples = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        samples.push(parse_line(line).with_context(|| format!("line {}: {line:?}", n + 1))?);
    }
    Ok(samples)
}

fn parse_line(line: &str) -> anyhow::Result<Sample> {
    let (name, rest) = match line.find(['{', ' ']) {
        Some(i) => (&line[..i], &line[i..]),
        None => bail!("no value"),
    };
    let mut labels = BTreeMap::new();
    let rest = if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices().peekable();
        let mut end = None;
        loop {
            // skip separators
            while let Some((_, c)) = chars.peek() {
                if *c == ',' || *c == ' ' {
                    chars.next();
                } else {
                    break;
                }
            }
            match chars.peek() {
                Some((i, '}')) => {
                    end = Some(*i);
                    break;
                }
                None => break,
                _ => {}
            }
            let mut key = String::new();
            for (_, c) in chars.by_ref() {
                if c == '=' {
                    break;
                }
                key.push(c);
            }
            match chars.next() {
                Some((_, '"')) => {}
                _ => bail!("label {key} value is not quoted"),
            }
            let mut value = String::new();
            let mut closed = false;
            while let Some((_, c)) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, other)) => value.push(other),
                        None => bail!("dangling escape"),
                    },
                    '"' => {
                        closed = true;
                        break;
                    }
                    other => value.push(other),
                }
            }
            if !closed {
                bail!("unterminated label value");
            }
            labels.insert(key.trim().to_string(), value);
        }
        let end = end.ok_or_else(|| anyhow!("unterminated label set"))?;
        &body[end + 1..]
    } else {
        rest
    };
    let value_str = rest
        .split_whitespace()
        .next()
        .ok_or_else(|| anyhow!("no value"))?;
    let value = match value_str {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().with_context(|| format!("bad value {v:?}"))?,
    };
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Samples named `name` whose labels include every pair in `labels`.
pub fn matching<'a>(
    samples: &'a [Sample],
    name: &'a str,
    labels: &'a [(&'a str, &'a str)],
) -> impl Iterator<Item = &'a Sample> + 'a {
    samples.iter().filter(move |s| {
        s.name == name
            && labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
    })
}

/// The value of the one sample named `name` whose labels include `labels`; `None` if there is
/// none. If several match, their values are summed.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for s in matching(samples, name, labels) {
        *found.get_or_insert(0.0) += s.value;
    }
    found
}

/// The `# TYPE` declared for `name` in exposition text.
pub fn declared_type(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix("# TYPE ")?;
        let mut parts = rest.split_whitespace();
        (parts.next()? == name).then(|| parts.next().unwrap_or("").to_string())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_labels_and_values() {
        let text = "# TYPE a counter\na_total{request=\"Metadata\",version=\"12\"} 3\nb 1.5\nc{x=\"q\\\"z\"} +Inf\n";
        let s = parse(text).unwrap();
        assert_eq!(value(&s, "a_total", &[("request", "Metadata")]), Some(3.0));
        assert_eq!(value(&s, "b", &[]), Some(1.5));
        assert_eq!(s[2].labels["x"], "q\"z");
        assert_eq!(declared_type(text, "a").as_deref(), Some("counter"));
    }

    #[test]
    fn dechunks() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_http(raw).unwrap().body, "abcde");
    }
}
