//! A tiny raw Kafka client: one TCP connection, requests at an exact version, no ApiVersions
//! negotiation, and direct access to the bytes for framing tests.
//!
//! Request headers use `R::header_version(version)` (v1, or v2 for flexible versions); response
//! headers use `R::Response::header_version(version)` (v0/v1, always v0 for ApiVersions), which is
//! what `ApiKey::request_header_version` / `response_header_version` return.

use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Default time to wait for one response.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest response frame the client accepts: answers to the largest hostile requests (every
/// name of a 100 MB CreateTopics refused with its message) are about six times the frame.
const MAX_RESPONSE: usize = 1024 * 1024 * 1024;

/// Encodes a complete request frame (size prefix, header, body).
pub fn encode_request<R: Request>(
    request: &R,
    version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
) -> anyhow::Result<BytesMut> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(client_id.map(|s| StrBytes::from_string(s.to_string())));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header
        .encode(&mut buf, R::header_version(version))
        .with_context(|| format!("encoding request header for api {} v{version}", R::KEY))?;
    request
        .encode(&mut buf, version)
        .with_context(|| format!("encoding request body for api {} v{version}", R::KEY))?;
    let size = i32::try_from(buf.len() - 4).context("request too large")?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf)
}

/// Decodes a response frame body (without the size prefix) for request type `R` at `version`.
/// Fails if any byte is left over, which catches a wrong header version or body layout.
pub fn decode_response<R: Request>(
    mut frame: Bytes,
    version: i16,
) -> anyhow::Result<(ResponseHeader, R::Response)> {
    let header_version = <R::Response as HeaderVersion>::header_version(version);
    let header = ResponseHeader::decode(&mut frame, header_version).with_context(|| {
        format!(
            "decoding response header v{header_version} for api {} v{version}",
            R::KEY
        )
    })?;
    let body = <R::Response as Decodable>::decode(&mut frame, version)
        .with_context(|| format!("decoding response body for api {} v{version}", R::KEY))?;
    if frame.has_remaining() {
        bail!(
            "{} trailing byte(s) after the api {} v{version} response body: {:02x?}",
            frame.remaining(),
            R::KEY,
            &frame[..frame.remaining().min(64)]
        );
    }
    Ok((header, body))
}

/// What happened when a test waited for the server to close a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closed {
    /// The server closed it (EOF or reset) and wrote nothing.
    Silently,
    /// The server wrote these bytes before closing or before the timeout.
    Wrote(Vec<u8>),
    /// The connection was still open after the timeout, with nothing written.
    StillOpen,
}

/// One connection to a node.
#[derive(Debug)]
pub struct KafkaConn {
    stream: TcpStream,
    client_id: Option<String>,
    next_correlation_id: i32,
    timeout: Duration,
}

impl KafkaConn {
    /// Connects to `addr` (`host:port`).
    pub async fn connect(addr: &str) -> anyhow::Result<Self> {
        let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr))
            .await
            .map_err(|_| anyhow!("connecting to {addr} timed out"))?
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(KafkaConn {
            stream,
            client_id: Some("gregor-integration".to_string()),
            next_correlation_id: 1,
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// Sets the client id sent in request headers (`None` sends a null string).
    pub fn set_client_id(&mut self, client_id: Option<&str>) {
        self.client_id = client_id.map(str::to_string);
    }

    /// The client id sent in request headers.
    pub fn client_id(&self) -> Option<&str> {
        self.client_id.as_deref()
    }

    /// Sets how long to wait for each response.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Sends `request` at `version` and waits for its response; checks the correlation id.
    pub async fn send<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> anyhow::Result<R::Response> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        self.write_request(request, version, correlation_id).await?;
        let (header, body) = self.read_response::<R>(version).await?;
        if header.correlation_id != correlation_id {
            bail!(
                "api {} v{version}: correlation id {} in the response, {} in the request",
                R::KEY,
                header.correlation_id,
                correlation_id
            );
        }
        Ok(body)
    }

    /// Writes one request frame without waiting for the response.
    pub async fn write_request<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        correlation_id: i32,
    ) -> anyhow::Result<()> {
        let frame = encode_request(request, version, correlation_id, self.client_id.as_deref())?;
        self.write_raw(&frame).await
    }

    /// Reads one response frame and decodes it as the response to `R` at `version`.
    pub async fn read_response<R: Request>(
        &mut self,
        version: i16,
    ) -> anyhow::Result<(ResponseHeader, R::Response)> {
        let frame = self.read_frame().await?.ok_or_else(|| {
            anyhow!(
                "connection closed before the api {} v{version} response",
                R::KEY
            )
        })?;
        decode_response::<R>(frame, version)
    }

    /// Writes raw bytes.
    pub async fn write_raw(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        tokio::time::timeout(self.timeout, self.stream.write_all(bytes))
            .await
            .map_err(|_| anyhow!("write timed out"))?
            .context("writing to the node")?;
        Ok(())
    }

    /// Reads one frame body (without the size prefix). `Ok(None)` when the server closed the
    /// connection cleanly before the first byte; an error if it closed mid-frame or timed out.
    pub async fn read_frame(&mut self) -> anyhow::Result<Option<Bytes>> {
        let timeout = self.timeout;
        tokio::time::timeout(timeout, self.read_frame_inner())
            .await
            .map_err(|_| anyhow!("no response within {timeout:?}"))?
    }

    async fn read_frame_inner(&mut self) -> anyhow::Result<Option<Bytes>> {
        let mut size = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            let n = self
                .stream
                .read(&mut size[got..])
                .await
                .context("reading a frame size")?;
            if n == 0 {
                if got == 0 {
                    return Ok(None);
                }
                bail!("connection closed inside a frame size prefix");
            }
            got += n;
        }
        let size = i32::from_be_bytes(size);
        let size = usize::try_from(size).map_err(|_| anyhow!("negative response size {size}"))?;
        if size > MAX_RESPONSE {
            bail!("response size {size} is implausible");
        }
        let mut body = BytesMut::zeroed(size);
        self.stream
            .read_exact(&mut body)
            .await
            .with_context(|| format!("reading a {size}-byte response body"))?;
        Ok(Some(body.freeze()))
    }

    /// Reads one frame including its size prefix, as raw bytes (for byte-exact comparisons).
    pub async fn read_raw_frame(&mut self) -> anyhow::Result<Vec<u8>> {
        let body = self
            .read_frame()
            .await?
            .ok_or_else(|| anyhow!("connection closed before a response"))?;
        let mut raw = Vec::with_capacity(body.len() + 4);
        raw.extend_from_slice(&i32::try_from(body.len())?.to_be_bytes());
        raw.extend_from_slice(&body);
        Ok(raw)
    }

    /// Waits up to `timeout` for the server to close the connection and reports whether it
    /// wrote anything first. A reset counts as a close.
    pub async fn wait_closed(&mut self, timeout: Duration) -> Closed {
        let mut written = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut buf = [0u8; 4096];
        loop {
            match tokio::time::timeout_at(deadline, self.stream.read(&mut buf)).await {
                Err(_) => {
                    return if written.is_empty() {
                        Closed::StillOpen
                    } else {
                        Closed::Wrote(written)
                    }
                }
                Ok(Ok(0)) | Ok(Err(_)) => {
                    return if written.is_empty() {
                        Closed::Silently
                    } else {
                        Closed::Wrote(written)
                    }
                }
                Ok(Ok(n)) => written.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// SASL/PLAIN on this connection (SaslHandshake v1, SaslAuthenticate v1): `Ok(None)` once
    /// authenticated, `Ok(Some(code))` with the error code the node refused it with.
    pub async fn authenticate_plain(
        &mut self,
        user: &str,
        password: &str,
    ) -> anyhow::Result<Option<i16>> {
        use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
        let handshake = self
            .send(
                &SaslHandshakeRequest::default()
                    .with_mechanism(kafka_protocol::protocol::StrBytes::from_static_str("PLAIN")),
                1,
            )
            .await?;
        if handshake.error_code != 0 {
            return Ok(Some(handshake.error_code));
        }
        let token = format!("\0{user}\0{password}");
        let answer = self
            .send(
                &SaslAuthenticateRequest::default()
                    .with_auth_bytes(Bytes::from(token.into_bytes())),
                1,
            )
            .await?;
        Ok((answer.error_code != 0).then_some(answer.error_code))
    }

    /// The underlying stream (e.g. to shut down the write half).
    pub fn stream_mut(&mut self) -> &mut TcpStream {
        &mut self.stream
    }
}
