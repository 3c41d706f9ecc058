//! A Kafka connection that negotiates versions with ApiVersions first, as every real client
//! does, so the tool works against any Kafka-compatible broker. Each call returns the decoded
//! response with the frame sizes on the wire and the time it took.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteTopicsRequest, MetadataRequest,
};
use kafka_protocol::protocol::{Message, Request, StrBytes};
use serde::Serialize;

use crate::client::{decode_response, encode_request, KafkaConn};

/// UNSUPPORTED_VERSION: the ApiVersions answer to a version the broker does not know.
const UNSUPPORTED_VERSION: i16 = 35;

/// The version of each API this tool sends, the highest both sides support.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Versions {
    /// ApiVersions.
    pub api_versions: i16,
    /// Metadata.
    pub metadata: i16,
    /// CreateTopics.
    pub create_topics: i16,
    /// DeleteTopics.
    pub delete_topics: i16,
    /// CreatePartitions.
    pub create_partitions: i16,
}

/// One answered request.
#[derive(Debug)]
pub struct Answer<T> {
    /// The decoded body.
    pub body: T,
    /// Request frame size including the 4-byte size prefix.
    pub request_bytes: usize,
    /// Response frame size including the size prefix.
    pub response_bytes: usize,
    /// From the first byte written to the last byte read.
    pub latency: Duration,
}

/// A connection with negotiated versions.
#[derive(Debug)]
pub struct ChurnConn {
    conn: KafkaConn,
    client_id: String,
    next_correlation_id: i32,
    /// What this connection sends.
    pub versions: Versions,
    /// `host:port` it is connected to.
    pub addr: String,
}

impl ChurnConn {
    /// Connects to `addr`, sends ApiVersions and picks every version. `create_topics` forces
    /// the CreateTopics version (checked against the broker's range).
    pub async fn connect(
        addr: &str,
        client_id: &str,
        timeout: Duration,
        create_topics: Option<i16>,
    ) -> anyhow::Result<Self> {
        let mut conn = KafkaConn::connect(addr).await?;
        conn.set_timeout(timeout);
        let mut this = ChurnConn {
            conn,
            client_id: client_id.to_string(),
            next_correlation_id: 1,
            versions: Versions {
                api_versions: 0,
                metadata: 0,
                create_topics: 0,
                delete_topics: 0,
                create_partitions: 0,
            },
            addr: addr.to_string(),
        };
        let api = this
            .api_versions()
            .await
            .with_context(|| format!("ApiVersions handshake with {addr}"))?;
        this.versions = pick_versions(&api, create_topics)
            .with_context(|| format!("negotiating versions with {addr}"))?;
        Ok(this)
    }

    /// ApiVersions at the highest version this crate knows; on UNSUPPORTED_VERSION (answered
    /// with a v0 body, as Kafka does) retries at the broker's highest.
    async fn api_versions(&mut self) -> anyhow::Result<ApiVersionsResponse> {
        let mut version = ApiVersionsRequest::VERSIONS.max;
        for _ in 0..2 {
            let request = ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("gregor-churn"))
                .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
            let cid = self.take_correlation_id();
            let frame = encode_request(&request, version, cid, Some(&self.client_id))?;
            self.conn.write_raw(&frame).await?;
            let body = self
                .conn
                .read_frame()
                .await?
                .ok_or_else(|| anyhow!("the broker closed the connection"))?;
            match decode_response::<ApiVersionsRequest>(body.clone(), version) {
                Ok((_, response)) if response.error_code == 0 => return Ok(response),
                Ok((_, response)) if response.error_code != UNSUPPORTED_VERSION => {
                    bail!("ApiVersions answered error {}", response.error_code)
                }
                _ => {
                    let (_, v0) = decode_response::<ApiVersionsRequest>(body, 0)
                        .context("decoding the ApiVersions answer")?;
                    if v0.error_code != UNSUPPORTED_VERSION {
                        bail!("ApiVersions answered error {}", v0.error_code);
                    }
                    let max = range_of(&v0, ApiVersionsRequest::KEY)
                        .map(|(_, max)| max)
                        .ok_or_else(|| anyhow!("the broker does not list ApiVersions"))?;
                    if max >= version {
                        bail!("the broker refused ApiVersions v{version} but lists up to v{max}");
                    }
                    version = max;
                }
            }
        }
        bail!("ApiVersions negotiation did not converge")
    }

    fn take_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        id
    }

    /// Sends `request` at `version`, waits for its answer and checks the correlation id.
    pub async fn call<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> anyhow::Result<Answer<R::Response>> {
        let cid = self.take_correlation_id();
        let frame = encode_request(request, version, cid, Some(&self.client_id))?;
        let started = Instant::now();
        self.conn.write_raw(&frame).await?;
        let body = self.conn.read_frame().await?.ok_or_else(|| {
            anyhow!(
                "{} closed the connection instead of answering api {} v{version}",
                self.addr,
                R::KEY
            )
        })?;
        let latency = started.elapsed();
        let response_bytes = body.len() + 4;
        let (header, body) = decode_response::<R>(body, version)?;
        if header.correlation_id != cid {
            bail!(
                "api {} v{version}: correlation id {} answered, {cid} sent",
                R::KEY,
                header.correlation_id
            );
        }
        Ok(Answer {
            body,
            request_bytes: frame.len(),
            response_bytes,
            latency,
        })
    }
}

fn range_of(response: &ApiVersionsResponse, key: i16) -> Option<(i16, i16)> {
    response
        .api_keys
        .iter()
        .find(|k| k.api_key == key)
        .map(|k| (k.min_version, k.max_version))
}

/// The highest version of `R` both sides support.
fn pick<R: Request + Message>(
    api: &ApiVersionsResponse,
    name: &str,
    forced: Option<i16>,
) -> anyhow::Result<i16> {
    let (broker_min, broker_max) =
        range_of(api, R::KEY).ok_or_else(|| anyhow!("the broker does not serve {name}"))?;
    let ours = R::VERSIONS;
    let lo = broker_min.max(ours.min);
    let hi = broker_max.min(ours.max);
    if let Some(v) = forced {
        if v < lo || v > hi {
            bail!(
                "{name} v{v} is not supported by both sides (broker v{broker_min}-{broker_max}, \
                 this tool v{}-{})",
                ours.min,
                ours.max
            );
        }
        return Ok(v);
    }
    if lo > hi {
        bail!(
            "no common {name} version (broker v{broker_min}-{broker_max}, this tool v{}-{})",
            ours.min,
            ours.max
        );
    }
    Ok(hi)
}

fn pick_versions(
    api: &ApiVersionsResponse,
    create_topics: Option<i16>,
) -> anyhow::Result<Versions> {
    Ok(Versions {
        api_versions: pick::<ApiVersionsRequest>(api, "ApiVersions", None)?,
        metadata: pick::<MetadataRequest>(api, "Metadata", None)?,
        create_topics: pick::<CreateTopicsRequest>(api, "CreateTopics", create_topics)?,
        delete_topics: pick::<DeleteTopicsRequest>(api, "DeleteTopics", None)?,
        create_partitions: pick::<CreatePartitionsRequest>(api, "CreatePartitions", None)?,
    })
}
