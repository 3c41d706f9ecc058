//! TLS for SSL and SASL_SSL listeners with rustls: the server configuration from PEM key and
//! trust stores, the handshake, the principal of a client certificate (its subject as Java's
//! `X500Principal` renders it in RFC 2253, through `ssl.principal.mapping.rules`), and the
//! stream a connection reads and writes whether or not it is encrypted.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use gregor_actors::context::Principal;
use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::config_security::{ClientAuth, TlsSettings};

/// A byte stream that is plain TCP (`P`) or `T`, TLS over it (a listener's server side, or a
/// peer connection's client side), or one half of either.
pub enum MaybeTls<T, P = TcpStream> {
    /// Plain TCP.
    Plain(P),
    /// TLS over TCP.
    Tls(Box<T>),
}

/// A connection's byte stream on a listener.
pub(crate) type Stream = MaybeTls<TlsStream<TcpStream>>;

/// The reading half of a [`Stream`] split in two (a connection reads its next request while it
/// still answers the ones before). Plain TCP splits into tokio's owned halves, without a lock;
/// a TLS session, which both directions share, through `tokio::io::split`.
pub(crate) type StreamReader =
    MaybeTls<tokio::io::ReadHalf<TlsStream<TcpStream>>, tokio::net::tcp::OwnedReadHalf>;

/// The writing half of a [`Stream`] split in two.
pub(crate) type StreamWriter =
    MaybeTls<tokio::io::WriteHalf<TlsStream<TcpStream>>, tokio::net::tcp::OwnedWriteHalf>;

impl Stream {
    pub(crate) fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        match self {
            MaybeTls::Plain(tcp) => tcp.peer_addr(),
            MaybeTls::Tls(tls) => tls.get_ref().0.peer_addr(),
        }
    }

    pub(crate) fn split(self) -> (StreamReader, StreamWriter) {
        match self {
            MaybeTls::Plain(tcp) => {
                let (reader, writer) = tcp.into_split();
                (MaybeTls::Plain(reader), MaybeTls::Plain(writer))
            }
            MaybeTls::Tls(tls) => {
                let (reader, writer) = tokio::io::split(*tls);
                (
                    MaybeTls::Tls(Box::new(reader)),
                    MaybeTls::Tls(Box::new(writer)),
                )
            }
        }
    }
}

impl StreamReader {
    /// The stream again; `None` when `writer` is another stream's half.
    pub(crate) fn unsplit(self, writer: StreamWriter) -> Option<Stream> {
        match (self, writer) {
            (MaybeTls::Plain(reader), MaybeTls::Plain(writer)) => {
                reader.reunite(writer).ok().map(MaybeTls::Plain)
            }
            (MaybeTls::Tls(reader), MaybeTls::Tls(writer)) if reader.is_pair_of(&writer) => {
                Some(MaybeTls::Tls(Box::new(reader.unsplit(*writer))))
            }
            _ => None,
        }
    }
}

impl<T: AsyncRead + Unpin, P: AsyncRead + Unpin> AsyncRead for MaybeTls<T, P> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            MaybeTls::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<T: AsyncWrite + Unpin, P: AsyncWrite + Unpin> AsyncWrite for MaybeTls<T, P> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            MaybeTls::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    // A Fetch answer is written as several buffers (`fetch_parts`): one `writev` for them.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            MaybeTls::Tls(tls) => Pin::new(tls.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            MaybeTls::Plain(tcp) => tcp.is_write_vectored(),
            MaybeTls::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            MaybeTls::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            MaybeTls::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}

/// How often the key and trust store files are checked for changes.
const RELOAD_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// A TLS listener's acceptor (replaced when its store files change) and how it names its
/// clients.
#[derive(Clone)]
pub(crate) struct TlsListener {
    acceptor: Arc<arc_swap::ArcSwap<TlsAcceptor>>,
    settings: Arc<TlsSettings>,
}

impl TlsListener {
    /// The acceptor of `settings`; the error names what is wrong.
    pub(crate) fn new(settings: Arc<TlsSettings>) -> Result<Self, String> {
        let acceptor = acceptor(&settings)?;
        Ok(TlsListener {
            acceptor: Arc::new(arc_swap::ArcSwap::from_pointee(acceptor)),
            settings,
        })
    }

    /// Watches the store files: when one changes, the listener's new connections use the new
    /// certificates (a store that does not load is logged and the old one kept). Connections
    /// already open keep theirs.
    pub(crate) fn watch(&self, listener: String) {
        let paths: Vec<std::path::PathBuf> =
            [&self.settings.keystore_path, &self.settings.truststore_path]
                .into_iter()
                .flatten()
                .cloned()
                .collect();
        if paths.is_empty() {
            return;
        }
        let stamps = move || {
            paths
                .iter()
                .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
                .collect::<Vec<_>>()
        };
        let this = self.clone();
        tokio::spawn(async move {
            let mut seen = stamps();
            loop {
                tokio::time::sleep(RELOAD_CHECK).await;
                let now = stamps();
                if now == seen {
                    continue;
                }
                seen = now;
                match this.settings.reread().and_then(|s| acceptor(&s)) {
                    Ok(next) => {
                        this.acceptor.store(Arc::new(next));
                        tracing::info!(%listener, "reloaded the TLS key and trust stores");
                    }
                    Err(error) => tracing::warn!(
                        %listener,
                        %error,
                        "the changed TLS stores do not load; keeping the previous ones"
                    ),
                }
            }
        });
    }
}

/// The rustls server configuration of `settings`; the error names what is wrong.
fn acceptor(settings: &TlsSettings) -> Result<TlsAcceptor, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> =
        rustls_pemfile::certs(&mut settings.keystore_chain.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("cannot read the keystore certificates: {e}"))?;
    if certs.is_empty() {
        return Err("the keystore has no certificate".to_owned());
    }
    let key = rustls_pemfile::private_key(&mut settings.keystore_key.as_bytes())
        .map_err(|e| format!("cannot read the keystore key: {e}"))?
        .ok_or("the keystore has no unencrypted PKCS#8, PKCS#1 or SEC1 private key")?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match settings.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Requested | ClientAuth::Required => {
            let mut roots = RootCertStore::empty();
            let trusted = settings.truststore.as_deref().ok_or(
                    "ssl.client.auth requested or required needs a truststore (ssl.truststore.location)",
                )?;
            for cert in rustls_pemfile::certs(&mut trusted.as_bytes()) {
                let cert = cert.map_err(|e| format!("cannot read the truststore: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("bad truststore certificate: {e}"))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if settings.client_auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| e.to_string())?)
        }
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("the keystore's key does not fit its certificate: {e}"))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

impl TlsListener {
    /// Runs the server handshake; the stream and the principal of the client certificate
    /// (`User:ANONYMOUS` without one).
    pub(crate) async fn accept(&self, tcp: TcpStream) -> Result<(Stream, Principal), String> {
        let acceptor = TlsAcceptor::clone(&self.acceptor.load());
        let tls = acceptor
            .accept(tcp)
            .await
            .map_err(|e| format!("TLS handshake failed: {e}"))?;
        let principal = match tls.get_ref().1.peer_certificates().and_then(|c| c.first()) {
            Some(cert) => {
                let subject = subject_dn(cert)?;
                let name =
                    map_principal(&self.settings.principal_rules, &subject).ok_or_else(|| {
                        format!("no ssl.principal.mapping.rules rule matches {subject}")
                    })?;
                Principal {
                    principal_type: "User".to_owned(),
                    name,
                }
            }
            None => Principal::anonymous(),
        };
        Ok((Stream::Tls(Box::new(tls)), principal))
    }
}

/// The subject of a DER certificate as Java's `X500Principal.getName()` (RFC 2253): the last
/// RDN first, attributes by their RFC 2253 keyword (dotted OID with a `#` hex value otherwise),
/// special characters escaped.
pub(crate) fn subject_dn(cert: &[u8]) -> Result<String, String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert)
        .map_err(|e| format!("cannot parse the client certificate: {e}"))?;
    let mut rdns = Vec::new();
    for rdn in parsed
        .subject()
        .iter_rdn()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        let mut parts = Vec::new();
        for attribute in rdn.iter() {
            let oid = attribute.attr_type().to_id_string();
            let keyword = match oid.as_str() {
                "2.5.4.3" => Some("CN"),
                "2.5.4.6" => Some("C"),
                "2.5.4.7" => Some("L"),
                "2.5.4.8" => Some("ST"),
                "2.5.4.9" => Some("STREET"),
                "2.5.4.10" => Some("O"),
                "2.5.4.11" => Some("OU"),
                "0.9.2342.19200300.100.1.25" => Some("DC"),
                "0.9.2342.19200300.100.1.1" => Some("UID"),
                _ => None,
            };
            parts.push(match (keyword, attribute.as_str()) {
                (Some(keyword), Ok(value)) => format!("{keyword}={}", escape(value)),
                _ => {
                    use x509_parser::der_parser::asn1_rs::ToDer;
                    let raw = attribute.attr_value().to_der_vec().unwrap_or_default();
                    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
                    format!("{oid}=#{hex}")
                }
            });
        }
        rdns.push(parts.join("+"));
    }
    Ok(rdns.join(","))
}

/// RFC 2253 escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == ' ' || c == '#'))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One `ssl.principal.mapping.rules` rule (KIP-371).
#[derive(Clone, Debug)]
pub enum PrincipalRule {
    /// The distinguished name unchanged.
    Default,
    /// `RULE:<regex>/<replacement>/[L|U]`: applies when the regex matches the whole name.
    Rule {
        /// The pattern, anchored.
        pattern: regex::Regex,
        /// `$n` groups allowed.
        replacement: String,
        /// `Some(true)` = lower case, `Some(false)` = upper case.
        lower: Option<bool>,
    },
}

/// The first rule that applies to `dn`, applied; `None` when none does.
pub(crate) fn map_principal(rules: &[PrincipalRule], dn: &str) -> Option<String> {
    for rule in rules {
        match rule {
            PrincipalRule::Default => return Some(dn.to_owned()),
            PrincipalRule::Rule {
                pattern,
                replacement,
                lower,
            } => {
                let Some(captures) = pattern.captures(dn) else {
                    continue;
                };
                let mut name = String::new();
                captures.expand(replacement, &mut name);
                return Some(match lower {
                    Some(true) => name.to_lowercase(),
                    Some(false) => name.to_uppercase(),
                    None => name,
                });
            }
        }
    }
    None
}

/// Parses `ssl.principal.mapping.rules`: comma-separated `DEFAULT` or
/// `RULE:pattern/replacement/[LU]` entries (a rule's pattern may hold commas).
pub fn parse_principal_rules(text: &str) -> Result<Vec<PrincipalRule>, String> {
    let mut rules = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("DEFAULT") {
            rules.push(PrincipalRule::Default);
            rest = after.trim_start().trim_start_matches(',').trim_start();
            continue;
        }
        let body = rest.strip_prefix("RULE:").ok_or_else(|| {
            format!("expected DEFAULT or RULE:pattern/replacement/[LU] at '{rest}'")
        })?;
        let (pattern, after) = body
            .split_once('/')
            .ok_or_else(|| format!("rule '{body}' has no replacement"))?;
        let (replacement, after) = after
            .split_once('/')
            .ok_or_else(|| format!("rule '{body}' does not end with /"))?;
        let (lower, after) = match after.chars().next() {
            Some('L') => (Some(true), &after[1..]),
            Some('U') => (Some(false), &after[1..]),
            _ => (None, after),
        };
        let pattern = regex::Regex::new(&format!("^(?:{pattern})$"))
            .map_err(|e| format!("bad pattern in rule '{body}': {e}"))?;
        rules.push(PrincipalRule::Rule {
            pattern,
            replacement: replacement.to_owned(),
            lower,
        });
        rest = after.trim_start().trim_start_matches(',').trim_start();
    }
    if rules.is_empty() {
        rules.push(PrincipalRule::Default);
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_rules_as_kafka_applies_them() -> Result<(), String> {
        let rules = parse_principal_rules(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT",
        )?;
        assert_eq!(
            map_principal(&rules, "CN=kafka1,OU=ServiceUsers,O=Org,C=US").as_deref(),
            Some("kafka1")
        );
        assert_eq!(
            map_principal(
                &rules,
                "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=SF,ST=CA,C=US"
            )
            .as_deref(),
            Some("duke@javasoft")
        );
        assert_eq!(
            map_principal(&rules, "CN=other,O=x").as_deref(),
            Some("CN=other,O=x")
        );
        let strict = parse_principal_rules("RULE:^CN=([a-z]+)$/$1/U")?;
        assert_eq!(map_principal(&strict, "CN=alice").as_deref(), Some("ALICE"));
        assert_eq!(map_principal(&strict, "CN=alice,O=x"), None);
        assert!(parse_principal_rules("NOPE").is_err());
        assert!(parse_principal_rules("RULE:^CN=(.*$/$1/").is_err());
        Ok(())
    }

    #[test]
    fn values_are_escaped_as_rfc_2253() {
        assert_eq!(escape("a,b+c"), "a\\,b\\+c");
        assert_eq!(escape(" #x "), "\\ #x\\ ");
        assert_eq!(escape("plain"), "plain");
    }
}
