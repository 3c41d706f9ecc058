//! A small Kafka admin client for the `gregor` tools: connect to a bootstrap server, negotiate
//! versions with ApiVersions, send requests at the negotiated version and turn error codes into
//! messages. It speaks only the public wire protocol, so the tools work against Apache Kafka
//! too.

/// `print!` for the tools (the modules below see it by textual scope): when stdout's reader has gone (`| head`, `| grep -q`), the tool
/// ends quietly, as a C tool ended by SIGPIPE does, instead of the panic `print!` raises. (Rust
/// ignores SIGPIPE, and restoring it takes `unsafe`, which this workspace forbids.)
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::admin::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` for the tools; see [`out!`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::admin::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes to stdout; see [`out!`]. Another write error (a full disk behind a redirection) is
/// reported on stderr and ends the tool with a failure.
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_fmt(args) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(error) => {
            eprintln!("gregor: cannot write to stdout: {error}");
            std::process::exit(1);
        }
    }
}

pub mod acls;
pub mod cli;
pub mod client_metrics;
pub mod client_quotas;
pub mod cluster;
pub mod configs;
pub mod console;
mod console_group;
pub mod consumer_groups;
pub mod features;
pub mod leader_election;
pub mod metadata_quorum;
pub mod reassign;
pub mod records;
pub mod topics;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest response frame accepted.
const MAX_RESPONSE: usize = 256 * 1024 * 1024;

/// A failure of an admin operation; `Display` is what the tool prints.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// Network or protocol failure.
    #[error("{0}")]
    Io(String),
    /// The broker does not support what is needed.
    #[error("{0}")]
    UnsupportedVersion(String),
    /// The broker answered with an error code.
    #[error("{}", kafka_message(*code, message.as_deref()))]
    Broker {
        /// The error code.
        code: i16,
        /// The broker's message, if any.
        message: Option<String>,
    },
}

/// Reports a usage mistake found after the command line was parsed exactly as clap reports one
/// it cannot parse: `error: <message>`, the tool's usage, exit status 1.
pub fn usage_exit<A: clap::Args>(tool: &'static str, message: &str) -> ! {
    exit_for_usage(
        A::augment_args(clap::Command::new(tool))
            .bin_name(format!("gregor {tool}"))
            .error(clap::error::ErrorKind::ArgumentConflict, message),
    )
}

/// Ends the process for what clap found on the command line: help and version on stdout with
/// status 0, a wrong command line on stderr with status 1, as Kafka's tools exit
/// (`CommandLineUtils.printUsageAndExit`) where clap would exit 2; scripts written against
/// kafka-*.sh test for 1.
pub fn exit_for_usage(error: clap::Error) -> ! {
    use clap::error::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        error.exit()
    }
    // Printing to a closed stderr has nowhere to report its failure.
    let _ = error.print();
    std::process::exit(1)
}

/// Kafka's exception text for a code: the broker's message, or the code's default one.
pub fn kafka_message(code: i16, message: Option<&str>) -> String {
    let error = ResponseError::try_from_code(code);
    let name = error.map_or_else(|| format!("error code {code}"), |e| format!("{e:?}"));
    match message {
        Some(message) if !message.is_empty() => format!("{message} ({name})"),
        _ => match error {
            Some(error) => format!("{error} ({name})"),
            None => name,
        },
    }
}

/// What a Java client's exception for `code` says (`getMessage()`): the broker's message, or
/// the code's default text when the broker sent none (tools that print Kafka's texts use this).
pub fn java_message(code: i16, message: Option<&str>) -> String {
    match message {
        Some(message) if !message.is_empty() => message.to_owned(),
        _ => default_message(code)
            .map_or_else(|| kafka_message(code, None), std::borrow::ToOwned::to_owned),
    }
}

/// Kafka's `Errors` default texts of the codes topic and quota requests answer with a null
/// message (the protocol crate keeps these texts only as documentation).
fn default_message(code: i16) -> Option<&'static str> {
    Some(match code {
        -1 => "The server experienced an unexpected error when processing the request.",
        3 => "This server does not host this topic-partition.",
        7 => "The request timed out.",
        17 => "The request attempted to perform an operation on an invalid topic.",
        29 => "Topic authorization failed.",
        35 => "The version of API is not supported.",
        36 => "Topic with this name already exists.",
        37 => "Number of partitions is below 1.",
        38 => "Replication factor is below 1 or larger than the number of available brokers.",
        39 => "Replica assignment is invalid.",
        40 => "Configuration is invalid.",
        41 => "This is not the correct controller for this cluster.",
        42 => "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.",
        44 => "Request parameters do not satisfy the configured policy.",
        73 => "Topic deletion is disabled.",
        89 => "The throttling quota has been exceeded.",
        100 => "This server does not host this topic ID.",
        102 => "The given broker ID was not registered.",
        _ => return None,
    })
}

/// The error of a non-zero `code`.
pub fn check(code: i16, message: Option<&StrBytes>) -> Result<(), AdminError> {
    if code == 0 {
        return Ok(());
    }
    Err(AdminError::Broker {
        code,
        message: message.map(|m| m.to_string()),
    })
}

/// `--bootstrap-server` or `--bootstrap-controller`, exactly one: the tools that may also talk
/// to the controllers directly, as Kafka's.
#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
pub struct Bootstrap {
    /// A comma-separated list of host:port pairs to use for establishing the connection to the
    /// Kafka cluster.
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: Option<String>,
    /// A comma-separated list of host:port pairs to use for establishing the connection to the
    /// KRaft quorum.
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_controller: Option<String>,
}

/// The settings of a `--command-config` file that Gregor's tools honour: Kafka's admin-client
/// properties. Connections are PLAINTEXT, or SASL_PLAINTEXT with `sasl.mechanism=PLAIN` (the
/// user and password from `sasl.jaas.config`); any other `security.protocol` or mechanism is
/// refused rather than silently sent otherwise.
#[derive(Default)]
pub struct CommandConfig {
    /// `client.id`: the request header's client id, which quotas are charged to.
    pub client_id: Option<String>,
    /// SASL/PLAIN credentials (user, password) to authenticate every connection with.
    pub sasl_plain: Option<(String, String)>,
}

// The password stays out of debug output.
impl std::fmt::Debug for CommandConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandConfig")
            .field("client_id", &self.client_id)
            .field("sasl_user", &self.sasl_plain.as_ref().map(|(user, _)| user))
            .finish()
    }
}

/// The `username` and `password` options of a `sasl.jaas.config` value
/// (`<LoginModule> required username="u" password="p";`).
fn jaas_credentials(jaas: &str) -> Option<(String, String)> {
    let option = |name: &str| {
        let start = jaas.find(&format!("{name}=\""))? + name.len() + 2;
        let end = start + jaas[start..].find('"')?;
        Some(jaas[start..end].to_owned())
    };
    Some((option("username")?, option("password")?))
}

impl CommandConfig {
    /// Reads `path` (Java properties); `None` gives the defaults.
    pub fn load(path: Option<&std::path::Path>) -> Result<Self, AdminError> {
        let Some(path) = path else {
            return Ok(CommandConfig::default());
        };
        let unreadable = |e: &dyn std::fmt::Display| {
            AdminError::Io(format!(
                "cannot read the command config {}: {e}",
                path.display()
            ))
        };
        let file = std::fs::File::open(path).map_err(|e| unreadable(&e))?;
        let properties =
            java_properties::read(std::io::BufReader::new(file)).map_err(|e| unreadable(&e))?;
        let mut sasl_plain = None;
        if let Some(protocol) = properties.get("security.protocol") {
            if protocol.eq_ignore_ascii_case("SASL_PLAINTEXT") {
                // Kafka's default mechanism is GSSAPI.
                let mechanism = properties
                    .get("sasl.mechanism")
                    .map_or("GSSAPI", String::as_str);
                if !mechanism.eq_ignore_ascii_case("PLAIN") {
                    return Err(AdminError::Io(format!(
                        "sasl.mechanism={mechanism} in {} is not supported by Gregor's tools (PLAIN only)",
                        path.display()
                    )));
                }
                sasl_plain = Some(
                    properties
                        .get("sasl.jaas.config")
                        .and_then(|jaas| jaas_credentials(jaas))
                        .ok_or_else(|| {
                            AdminError::Io(format!(
                                "sasl.jaas.config in {} must name a username and a password",
                                path.display()
                            ))
                        })?,
                );
            } else if !protocol.eq_ignore_ascii_case("PLAINTEXT") {
                return Err(AdminError::Io(format!(
                    "security.protocol={protocol} in {} is not supported by Gregor's tools (PLAINTEXT or SASL_PLAINTEXT only)",
                    path.display()
                )));
            }
        }
        Ok(CommandConfig {
            client_id: properties.get("client.id").cloned(),
            sasl_plain,
        })
    }

    /// Connects to `bootstrap` with these settings.
    pub async fn connect(&self, bootstrap: &str) -> Result<AdminClient, AdminError> {
        let mut client = AdminClient::connect(bootstrap).await?;
        if let Some(client_id) = &self.client_id {
            client.set_client_id(client_id);
        }
        if let Some((user, password)) = &self.sasl_plain {
            client.authenticate_plain(user, password).await?;
        }
        Ok(client)
    }
}

/// One connection with its negotiated version ranges.
pub struct AdminClient {
    stream: crate::network::peer::PeerStream,
    correlation_id: i32,
    /// api key → broker's (min, max).
    versions: BTreeMap<i16, (i16, i16)>,
    /// The request header's client id (quotas are charged to it, so `client.id` can set it).
    client_id: StrBytes,
    /// How and when to renew the connection's SASL session, when its listener limits it.
    renewal: Option<SessionRenewal>,
}

/// A SASL session to renew on its connection before the listener's
/// `connections.max.reauth.ms` ends it (KIP-368), as Kafka's clients do.
struct SessionRenewal {
    connector: std::sync::Arc<crate::network::peer::PeerConnector>,
    at: tokio::time::Instant,
}

impl SessionRenewal {
    /// The renewal of a session of `lifetime` (`None`: it never ends).
    fn of(
        connector: &std::sync::Arc<crate::network::peer::PeerConnector>,
        lifetime: Option<Duration>,
    ) -> Option<Self> {
        crate::network::peer::renewal_at(lifetime).map(|at| SessionRenewal {
            connector: connector.clone(),
            at,
        })
    }
}

impl AdminClient {
    /// Connects to the first reachable of `bootstrap` (comma-separated `host:port`) and runs
    /// ApiVersions.
    pub async fn connect(bootstrap: &str) -> Result<Self, AdminError> {
        let mut last = String::from("no bootstrap server given");
        for server in bootstrap
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            match tokio::time::timeout(REQUEST_TIMEOUT, TcpStream::connect(server)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    let mut client = AdminClient {
                        stream: crate::network::peer::PeerStream::Plain(stream),
                        correlation_id: 0,
                        versions: BTreeMap::new(),
                        client_id: StrBytes::from_static_str("gregor-admin"),
                        renewal: None,
                    };
                    client.negotiate().await?;
                    return Ok(client);
                }
                Ok(Err(error)) => last = format!("cannot connect to {server}: {error}"),
                Err(_) => last = format!("cannot connect to {server}: timed out"),
            }
        }
        Err(AdminError::Io(last))
    }

    /// Connects to `address` through `connector` (TLS and SASL as its listener needs; how a
    /// broker reaches another broker's inter-broker listener) and runs ApiVersions.
    pub async fn connect_secured(
        address: &str,
        connector: &std::sync::Arc<crate::network::peer::PeerConnector>,
    ) -> Result<Self, AdminError> {
        let (stream, lifetime) = connector
            .connect(address, REQUEST_TIMEOUT)
            .await
            .map_err(|e| AdminError::Io(format!("cannot connect to {address}: {e}")))?;
        let mut client = AdminClient {
            stream,
            correlation_id: 0,
            versions: BTreeMap::new(),
            client_id: StrBytes::from_static_str("gregor-admin"),
            renewal: SessionRenewal::of(connector, lifetime),
        };
        client.negotiate().await?;
        Ok(client)
    }

    /// Re-authenticates on this connection when its session is due for renewal.
    async fn renew_session_if_due(&mut self) -> Result<(), AdminError> {
        let Some(renewal) = self
            .renewal
            .take_if(|r| r.at <= tokio::time::Instant::now())
        else {
            return Ok(());
        };
        let lifetime = tokio::time::timeout(
            REQUEST_TIMEOUT,
            renewal.connector.reauthenticate(&mut self.stream),
        )
        .await
        .map_err(|_| AdminError::Io("re-authentication not done in time".into()))?
        .map_err(AdminError::Io)?;
        self.renewal = SessionRenewal::of(&renewal.connector, lifetime);
        Ok(())
    }

    async fn negotiate(&mut self) -> Result<(), AdminError> {
        // v3 is what every broker since 2.4 answers; older ones answer v0 with error 35.
        let response = self
            .send_at(
                &ApiVersionsRequest::default()
                    .with_client_software_name(StrBytes::from_static_str("gregor-admin"))
                    .with_client_software_version(StrBytes::from_static_str(env!(
                        "CARGO_PKG_VERSION"
                    ))),
                3,
            )
            .await?;
        check(response.error_code, None)?;
        self.versions = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Ok(())
    }

    /// SASL/PLAIN on this connection (KIP-152: SaslHandshake v1, then SaslAuthenticate).
    pub async fn authenticate_plain(
        &mut self,
        user: &str,
        password: &str,
    ) -> Result<(), AdminError> {
        let handshake = self
            .send_at(
                &kafka_protocol::messages::SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_static_str("PLAIN")),
                1,
            )
            .await?;
        check(handshake.error_code, None)?;
        let token = format!("\0{user}\0{password}");
        let (_, answer) = self
            .send(
                &kafka_protocol::messages::SaslAuthenticateRequest::default()
                    .with_auth_bytes(Bytes::from(token.into_bytes())),
            )
            .await?;
        check(answer.error_code, answer.error_message.as_ref())
    }

    /// Sends later requests with this client id (`client.id` of a `--command-config` file).
    pub fn set_client_id(&mut self, client_id: &str) {
        self.client_id = StrBytes::from_string(client_id.to_owned());
    }

    /// The broker's highest version of `key` that this client also speaks.
    pub fn version_of<R: Request>(&self) -> Option<i16> {
        let (min, max) = *self.versions.get(&(R::KEY))?;
        let ours = <R as Message>::VERSIONS;
        let version = max.min(ours.max);
        (version >= min.max(ours.min)).then_some(version)
    }

    /// Sends `request` at the negotiated version.
    pub async fn send<R: Request>(
        &mut self,
        request: &R,
    ) -> Result<(i16, R::Response), AdminError> {
        let version = self.version_of::<R>().ok_or_else(|| {
            AdminError::UnsupportedVersion(format!(
                "The broker does not support {:?}",
                ApiKey::try_from(R::KEY).map_or_else(|_| R::KEY.to_string(), |k| format!("{k:?}"))
            ))
        })?;
        Ok((version, self.send_at(request, version).await?))
    }

    /// Sends `request` at exactly `version` without reading a response (Produce with acks=0,
    /// which the broker does not answer).
    pub async fn send_only<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<(), AdminError> {
        self.renew_session_if_due().await?;
        let buf = self.frame(request, version)?;
        tokio::time::timeout(REQUEST_TIMEOUT, self.stream.write_all(&buf))
            .await
            .map_err(|_| AdminError::Io("the broker did not take the request in time".into()))?
            .map_err(|e| AdminError::Io(format!("sending: {e}")))
    }

    /// The frame of `request` at `version` under the next correlation id.
    fn frame<R: Request>(&mut self, request: &R, version: i16) -> Result<BytesMut, AdminError> {
        self.correlation_id += 1;
        let io = |what: &str, e: &dyn std::fmt::Display| AdminError::Io(format!("{what}: {e}"));
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header
            .encode(&mut buf, R::header_version(version))
            .map_err(|e| io("encoding the request header", &e))?;
        request
            .encode(&mut buf, version)
            .map_err(|e| io("encoding the request", &e))?;
        let size = i32::try_from(buf.len() - 4).map_err(|e| io("request size", &e))?;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        Ok(buf)
    }

    /// Sends `request` at exactly `version`.
    pub async fn send_at<R: Request>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, AdminError> {
        self.renew_session_if_due().await?;
        let buf = self.frame(request, version)?;
        let io = |what: &str, e: &dyn std::fmt::Display| AdminError::Io(format!("{what}: {e}"));
        let exchange = async {
            self.stream
                .write_all(&buf)
                .await
                .map_err(|e| io("sending", &e))?;
            let size = self
                .stream
                .read_i32()
                .await
                .map_err(|e| io("reading the response", &e))?;
            let size = usize::try_from(size)
                .ok()
                .filter(|s| *s <= MAX_RESPONSE)
                .ok_or_else(|| AdminError::Io(format!("bad response size {size}")))?;
            let mut body = vec![0; size];
            self.stream
                .read_exact(&mut body)
                .await
                .map_err(|e| io("reading the response", &e))?;
            Ok::<_, AdminError>(Bytes::from(body))
        };
        let mut frame = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| AdminError::Io("the broker did not answer in time".into()))??;
        // ApiVersions answers an unknown version with a v0 body.
        let version = if R::KEY == ApiKey::ApiVersions as i16
            && frame.len() >= 6
            && i16::from_be_bytes([frame[4], frame[5]]) != 0
        {
            0
        } else {
            version
        };
        let header = ResponseHeader::decode(
            &mut frame,
            <R::Response as HeaderVersion>::header_version(version),
        )
        .map_err(|e| io("decoding the response header", &e))?;
        if header.correlation_id != self.correlation_id {
            return Err(AdminError::Io(format!(
                "response correlation id {} does not match {}",
                header.correlation_id, self.correlation_id
            )));
        }
        let response = R::Response::decode(&mut frame, version)
            .map_err(|e| io("decoding the response", &e))?;
        if frame.has_remaining() {
            return Err(AdminError::Io(format!(
                "{} trailing bytes in the response",
                frame.remaining()
            )));
        }
        Ok(response)
    }
}

/// The `topic` and `partition` fields of one entry of a tool's `partitions` JSON array, with
/// the messages Kafka's tools give for a missing or mistyped field.
pub fn json_topic_partition(entry: &serde_json::Value) -> Result<(String, i32), String> {
    let field = |name: &str| {
        entry
            .get(name)
            .ok_or_else(|| format!("No such field exists: `{name}`"))
    };
    let topic = field("topic")?
        .as_str()
        .ok_or_else(|| "Expected a string value for topic".to_owned())?
        .to_owned();
    let partition = field("partition")?
        .as_i64()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| "Expected an int value for partition".to_owned())?;
    Ok((topic, partition))
}

/// Runs an async admin operation on a small runtime of its own.
pub fn block_on<T>(future: impl std::future::Future<Output = T>) -> Result<T, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map(|runtime| runtime.block_on(future))
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// DescribeCluster `endpoint_type` of controllers (KIP-919).
const CONTROLLER_ENDPOINTS: i8 = 2;

/// From a client connected to a controller, a client of the active controller named by
/// DescribeCluster (KIP-919): quorum and cluster requests must reach it, and it need not be the
/// bootstrap controller that answered. Keeps `client` when no active controller is named.
pub(crate) async fn to_active_controller(
    mut client: AdminClient,
    config: &CommandConfig,
) -> Result<AdminClient, String> {
    let (_, cluster) = client
        .send(
            &kafka_protocol::messages::DescribeClusterRequest::default()
                .with_endpoint_type(CONTROLLER_ENDPOINTS),
        )
        .await
        .map_err(|e| e.to_string())?;
    check(cluster.error_code, cluster.error_message.as_ref()).map_err(|e| e.to_string())?;
    let active = cluster
        .brokers
        .iter()
        .find(|c| c.broker_id == cluster.controller_id)
        .map(|c| format!("{}:{}", c.host, c.port));
    match active {
        Some(addr) => config.connect(&addr).await.map_err(|e| e.to_string()),
        None => Ok(client),
    }
}
