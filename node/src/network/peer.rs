//! The client side of this node's connections to its peers' listeners (quorum RPCs, joins,
//! forwarding and raft links to controller listeners; replica fetching from brokers): TCP,
//! then TLS when the listener's protocol has it, then SASL (SaslHandshake v1, SaslAuthenticate
//! v1) with PLAIN or SCRAM, as Kafka's `NetworkClient` authenticates a broker or a controller.

use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use bytes::{BufMut, Bytes, BytesMut};
use gregor_publishers::scram::{xor, ScramMechanism, MIN_ITERATIONS};
use kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rand::Rng;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::config_security::{ClientSasl, ClientSecurity, ClientTls, SaslMechanism};

/// Largest SASL response accepted from a peer (Kafka's default `sasl.server.max.receive.size`
/// bounds the other direction; server messages are a few hundred bytes).
const MAX_SASL_RESPONSE: usize = 64 * 1024;

/// The byte stream of a connection to a peer: plain TCP or TLS over it.
pub type PeerStream = super::tls::MaybeTls<TlsStream<TcpStream>>;

/// Why a connection to a peer could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    /// No TCP connection (the peer is down or unreachable).
    #[error("{0}")]
    Unreachable(String),
    /// Connected, but the TLS handshake or the SASL exchange failed.
    #[error("{0}")]
    Refused(String),
}

/// Opens secured connections to one listener of the peers: the TLS client configuration is
/// built once, the SASL credentials are the configured ones.
pub struct PeerConnector {
    security: ClientSecurity,
    tls: Option<TlsConnector>,
}

impl std::fmt::Debug for PeerConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerConnector")
            .field("security", &self.security)
            .finish_non_exhaustive()
    }
}

impl PeerConnector {
    /// A connector for `security`; the error names a store that does not load.
    pub(crate) fn new(security: ClientSecurity) -> Result<Self, String> {
        let tls = match &security.tls {
            Some(stores) => Some(TlsConnector::from(Arc::new(client_config(stores)?))),
            None => None,
        };
        Ok(PeerConnector { security, tls })
    }

    /// Plain TCP, no authentication (tools, tests, PLAINTEXT clusters).
    pub(crate) fn plaintext() -> Arc<Self> {
        Arc::new(PeerConnector {
            security: ClientSecurity::plaintext(),
            tls: None,
        })
    }

    /// Connects to `addr` (`host:port`), runs the TLS handshake and the SASL exchange the
    /// listener needs, all within `timeout`. Also returns the SASL session's lifetime when the
    /// listener limits it (`connections.max.reauth.ms`, KIP-368).
    pub(crate) async fn connect(
        &self,
        addr: &str,
        timeout: Duration,
    ) -> Result<(PeerStream, Option<Duration>), ConnectError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let tcp = match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => return Err(ConnectError::Unreachable(e.to_string())),
            Err(_) => {
                return Err(ConnectError::Unreachable(format!(
                    "no answer within {timeout:?}"
                )))
            }
        };
        let _ = tcp.set_nodelay(true);
        let secure = async {
            let mut stream = match &self.tls {
                Some(connector) => {
                    let server = server_name(addr)?;
                    let tls = connector
                        .connect(server, tcp)
                        .await
                        .map_err(|e| format!("TLS handshake failed: {e}"))?;
                    PeerStream::Tls(Box::new(tls))
                }
                None => PeerStream::Plain(tcp),
            };
            let lifetime = self.reauthenticate(&mut stream).await?;
            Ok::<_, String>((stream, lifetime))
        };
        match tokio::time::timeout_at(deadline, secure).await {
            Ok(Ok(connected)) => Ok(connected),
            Ok(Err(reason)) => Err(ConnectError::Refused(reason)),
            Err(_) => Err(ConnectError::Refused(format!(
                "TLS or SASL not done within {timeout:?}"
            ))),
        }
    }
}

impl PeerConnector {
    /// Runs the SASL exchange on `stream` (at connect, and again before the session's lifetime
    /// ends: a SaslHandshake on an authenticated connection starts a re-authentication, as
    /// Kafka's clients renew theirs); returns the new session's lifetime, if limited. Nothing
    /// to do without SASL.
    pub(crate) async fn reauthenticate(
        &self,
        stream: &mut PeerStream,
    ) -> Result<Option<Duration>, String> {
        let Some(sasl) = &self.security.sasl else {
            return Ok(None);
        };
        authenticate(stream, sasl).await.map_err(|e| {
            format!(
                "SASL {} authentication as {} to listener {} failed: {e}",
                sasl.mechanism.name(),
                sasl.username,
                self.security.listener
            )
        })
    }
}

/// The time a peer leaves between renewing its session and the session's end, where the
/// session is long enough: 5-15% of a short session (a test's 1.5 s) is 75-225 ms, which a
/// loaded node can spend before its next request to that peer, and a renewal is a SCRAM
/// exchange of its own.
const RENEWAL_MARGIN: Duration = Duration::from_secs(1);

/// When to renew a session of `lifetime`: at a random point between 85% and 95% of it, as
/// Kafka's clients do, so the server never sees it expire and peers do not renew together;
/// but [`RENEWAL_MARGIN`] before its end, or at half of it if that is later, when Kafka's
/// point leaves less.
fn renewal_after(lifetime: Duration) -> Duration {
    let kafkas = lifetime.mul_f64(rand::rng().random_range(0.85..0.95));
    let with_margin = lifetime.saturating_sub(RENEWAL_MARGIN).max(lifetime / 2);
    kafkas.min(with_margin)
}

/// When to renew a session of `lifetime`, from now (`None`: it never ends).
pub(crate) fn renewal_at(lifetime: Option<Duration>) -> Option<tokio::time::Instant> {
    lifetime.map(|lifetime| tokio::time::Instant::now() + renewal_after(lifetime))
}

/// The host of `addr` as the name the peer's certificate must hold (an IP address or a DNS
/// name, as Kafka's `ssl.endpoint.identification.algorithm=https` checks it).
fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = match addr.rsplit_once(':') {
        Some((host, _)) => host.trim_start_matches('[').trim_end_matches(']'),
        None => addr,
    };
    ServerName::try_from(host.to_owned()).map_err(|e| format!("bad host name {host}: {e}"))
}

/// The rustls client configuration of `stores`: the trusted CAs, and the keystore's
/// certificate for peers that ask for one.
fn client_config(stores: &ClientTls) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut stores.truststore.as_bytes()) {
        let cert = cert.map_err(|e| format!("cannot read the truststore: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("bad truststore certificate: {e}"))?;
    }
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    match &stores.keystore {
        None => Ok(builder.with_no_client_auth()),
        Some((chain, key)) => {
            let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut chain.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("cannot read the keystore certificates: {e}"))?;
            let key = rustls_pemfile::private_key(&mut key.as_bytes())
                .map_err(|e| format!("cannot read the keystore key: {e}"))?
                .ok_or("the keystore has no unencrypted PKCS#8, PKCS#1 or SEC1 private key")?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| format!("the keystore's key does not fit its certificate: {e}"))
        }
    }
}

/// One SASL exchange: SaslHandshake v1 naming the mechanism, then the mechanism's tokens in
/// SaslAuthenticate v1 requests. Returns the session's lifetime the server announced in its
/// last answer (`None`: unlimited).
pub async fn authenticate<S>(stream: &mut S, sasl: &ClientSasl) -> Result<Option<Duration>, String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut correlation = 0;
    let handshake: SaslHandshakeResponse = exchange(
        stream,
        &mut correlation,
        &SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(sasl.mechanism.name())),
        1,
    )
    .await?;
    if handshake.error_code != 0 {
        let enabled: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(format!(
            "the peer does not enable {} (error {}; it enables {})",
            sasl.mechanism.name(),
            handshake.error_code,
            enabled.join(", ")
        ));
    }
    let token =
        |bytes: Vec<u8>| SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
    match sasl.mechanism {
        SaslMechanism::Plain => {
            let message = format!("\0{}\0{}", sasl.username, sasl.password);
            let answer: SaslAuthenticateResponse =
                exchange(stream, &mut correlation, &token(message.into_bytes()), 1).await?;
            check(&answer)?;
            Ok(lifetime(&answer))
        }
        SaslMechanism::Scram(mechanism) => {
            let mut client = ScramClient::new(mechanism, &sasl.username, &sasl.password);
            let first: SaslAuthenticateResponse =
                exchange(stream, &mut correlation, &token(client.first()), 1).await?;
            check(&first)?;
            // The key derivation (thousands of HMAC rounds) runs off the async runtime, which
            // must keep serving this node's connections meanwhile.
            let challenge = first.auth_bytes.clone();
            let (client, last) = tokio::task::spawn_blocking(move || {
                let last = client.last(&challenge);
                (client, last)
            })
            .await
            .map_err(|e| format!("the SCRAM key derivation failed: {e}"))?;
            let last = last?;
            let answer: SaslAuthenticateResponse =
                exchange(stream, &mut correlation, &token(last), 1).await?;
            check(&answer)?;
            client.verify(&answer.auth_bytes)?;
            Ok(lifetime(&answer))
        }
    }
}

fn lifetime(answer: &SaslAuthenticateResponse) -> Option<Duration> {
    u64::try_from(answer.session_lifetime_ms)
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
}

fn check(answer: &SaslAuthenticateResponse) -> Result<(), String> {
    if answer.error_code == 0 {
        return Ok(());
    }
    Err(format!(
        "error {}: {}",
        answer.error_code,
        answer.error_message.as_deref().unwrap_or("no message")
    ))
}

/// Sends `request` at `version` and reads its response.
async fn exchange<S, R>(
    stream: &mut S,
    correlation: &mut i32,
    request: &R,
    version: i16,
) -> Result<R::Response, String>
where
    S: AsyncRead + AsyncWrite + Unpin,
    R: kafka_protocol::protocol::Request,
{
    *correlation += 1;
    let key = ApiKey::try_from(R::KEY).map_err(|_| format!("unknown api key {}", R::KEY))?;
    let mut frame = BytesMut::with_capacity(128);
    frame.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(*correlation)
        .with_client_id(Some(StrBytes::from_static_str("gregor-peer")))
        .encode(&mut frame, key.request_header_version(version))
        .map_err(|e| e.to_string())?;
    request
        .encode(&mut frame, version)
        .map_err(|e| e.to_string())?;
    let size = i32::try_from(frame.len() - 4).map_err(|e| e.to_string())?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    stream
        .write_all(&frame)
        .await
        .map_err(|e| format!("sending {key:?}: {e}"))?;
    let size = stream
        .read_i32()
        .await
        .map_err(|e| format!("reading the {key:?} answer: {e} (the peer closed the connection)"))?;
    let size = usize::try_from(size)
        .ok()
        .filter(|s| *s <= MAX_SASL_RESPONSE)
        .ok_or_else(|| format!("a {key:?} answer of {size} bytes"))?;
    let mut body = vec![0; size];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|e| format!("reading the {key:?} answer: {e}"))?;
    let mut body = Bytes::from(body);
    let header = ResponseHeader::decode(&mut body, key.response_header_version(version))
        .map_err(|e| format!("decoding the {key:?} answer: {e}"))?;
    if header.correlation_id != *correlation {
        return Err(format!(
            "a {key:?} answer for correlation id {}",
            header.correlation_id
        ));
    }
    R::Response::decode(&mut body, version).map_err(|e| format!("decoding the {key:?} answer: {e}"))
}

/// The client side of SCRAM (RFC 5802), as Kafka's `ScramSaslClient`: client-first with a
/// random nonce, client-final with the proof, and the server's signature checked.
struct ScramClient {
    mechanism: ScramMechanism,
    password: Vec<u8>,
    nonce: String,
    client_first_bare: String,
    /// The server key and the auth message, once client-final is sent.
    expected: Option<(Vec<u8>, String)>,
}

impl ScramClient {
    fn new(mechanism: ScramMechanism, username: &str, password: &str) -> Self {
        const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
        let mut random = rand::rng();
        let nonce: String = (0..32)
            .map(|_| char::from(DIGITS[random.random_range(0..DIGITS.len())]))
            .collect();
        Self::with_nonce(mechanism, username, password, nonce)
    }

    fn with_nonce(
        mechanism: ScramMechanism,
        username: &str,
        password: &str,
        nonce: String,
    ) -> Self {
        // RFC 5802 §5.1: ',' and '=' in the name are escaped.
        let name = username.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            mechanism,
            password: password.as_bytes().to_vec(),
            client_first_bare: format!("n={name},r={nonce}"),
            nonce,
            expected: None,
        }
    }

    fn first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// Client-final for the server-first message `challenge`.
    fn last(&mut self, challenge: &[u8]) -> Result<Vec<u8>, String> {
        let server_first = std::str::from_utf8(challenge)
            .map_err(|_| "the SCRAM server-first message is not UTF-8".to_owned())?;
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for attribute in server_first.split(',') {
            match attribute.split_once('=') {
                Some(("r", value)) => nonce = Some(value),
                Some(("s", value)) => salt = BASE64.decode(value).ok(),
                Some(("i", value)) => iterations = value.parse::<i32>().ok(),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(format!(
                "invalid SCRAM server-first message {server_first:?}"
            ));
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the SCRAM server nonce does not extend the client's".to_owned());
        }
        if iterations < MIN_ITERATIONS {
            return Err(format!(
                "the server asks for {iterations} iterations, fewer than {MIN_ITERATIONS}"
            ));
        }
        let salted = self.mechanism.salted_password(
            &self.password,
            &salt,
            u32::try_from(iterations).unwrap_or(0),
        );
        // "biws" is base64("n,,"): no channel binding, no authorization id.
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_key = self.mechanism.client_key(&salted);
        let stored_key = self.mechanism.stored_key(&client_key);
        let signature = self.mechanism.hmac(&stored_key, auth_message.as_bytes());
        let proof = xor(&client_key, &signature);
        self.expected = Some((self.mechanism.server_key(&salted), auth_message));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message: the server knew the credential.
    fn verify(&self, server_final: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(server_final)
            .map_err(|_| "the SCRAM server-final message is not UTF-8".to_owned())?;
        if let Some(error) = text.strip_prefix("e=") {
            return Err(format!("the server refused: {error}"));
        }
        let (server_key, auth_message) = self
            .expected
            .as_ref()
            .ok_or("a SCRAM server-final message before client-final")?;
        let expected = self.mechanism.hmac(server_key, auth_message.as_bytes());
        let signature = text
            .strip_prefix("v=")
            .and_then(|v| BASE64.decode(v).ok())
            .ok_or_else(|| format!("invalid SCRAM server-final message {text:?}"))?;
        if signature != expected {
            return Err("the server's SCRAM signature is wrong".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_keeps_a_margin_before_short_sessions_end() {
        for _ in 0..100 {
            let hour = renewal_after(Duration::from_secs(3600));
            assert!(hour >= Duration::from_secs(3060) && hour < Duration::from_secs(3420));
            assert_eq!(
                renewal_after(Duration::from_millis(3000)),
                Duration::from_millis(2000)
            );
            // Too short for the whole margin: half of it.
            assert_eq!(
                renewal_after(Duration::from_millis(1500)),
                Duration::from_millis(750)
            );
            assert_eq!(
                renewal_after(Duration::from_millis(800)),
                Duration::from_millis(400)
            );
        }
    }

    /// RFC 7677 §3: the SCRAM-SHA-256 exchange of user "user", password "pencil".
    #[test]
    fn scram_client_follows_rfc_7677() -> Result<(), String> {
        let mut client = ScramClient::with_nonce(
            ScramMechanism::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".to_owned(),
        );
        assert_eq!(client.first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO".to_vec());
        let last = client.last(
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
              s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        )?;
        assert_eq!(
            String::from_utf8_lossy(&last),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")?;
        assert!(client
            .verify(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .is_err());
        assert!(client.verify(b"e=invalid-proof").is_err());
        Ok(())
    }

    #[test]
    fn a_server_nonce_that_does_not_extend_the_clients_is_refused() {
        let mut client =
            ScramClient::with_nonce(ScramMechanism::Sha512, "a,b=c", "pw", "abc".to_owned());
        assert_eq!(client.first(), b"n,,n=a=2Cb=3Dc,r=abc".to_vec());
        assert!(client.last(b"r=xyz123,s=AAAA,i=4096").is_err());
        assert!(client.last(b"r=abc,s=AAAA,i=4096").is_err());
        assert!(client.last(b"r=abcdef,s=AAAA,i=100").is_err());
        assert!(client.last(b"r=abcdef,s=AAAA,i=4096").is_ok());
    }

    #[test]
    fn server_names_are_hosts_of_addresses() -> Result<(), String> {
        assert_eq!(
            server_name("127.0.0.1:9093")?,
            ServerName::try_from("127.0.0.1")
                .map_err(|e| e.to_string())?
                .to_owned()
        );
        assert_eq!(
            server_name("[::1]:9093")?,
            ServerName::try_from("::1")
                .map_err(|e| e.to_string())?
                .to_owned()
        );
        assert!(server_name("broker-1.example:9093").is_ok());
        Ok(())
    }
}
