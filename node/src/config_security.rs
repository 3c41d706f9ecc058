//! Listener security as Kafka configures it: `listener.security.protocol.map` gives each listener
//! its protocol; a SASL listener's mechanisms come from `sasl.enabled.mechanisms` (or
//! `listener.name.<l>.sasl.enabled.mechanisms`), and its PLAIN users from the JAAS options
//! `user_<name>="<password>"` of `listener.name.<l>.plain.sasl.jaas.config`. SCRAM users live in
//! the metadata image, not here.

use std::collections::BTreeMap;
use std::sync::Arc;

use gregor_publishers::scram::ScramMechanism;

use crate::config::ConfigError;

/// Kafka's `SecurityProtocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// No TLS, no authentication: every client is `User:ANONYMOUS`.
    Plaintext,
    /// SASL authentication over plain TCP.
    SaslPlaintext,
    /// TLS.
    Ssl,
    /// SASL authentication over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Parses Kafka's protocol name (any case).
    pub fn parse(name: &str) -> Option<Self> {
        match name.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether connections authenticate with SASL before any other request.
    pub fn is_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// A SASL mechanism Gregor serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    /// RFC 4616.
    Plain,
    /// RFC 5802 / RFC 7677.
    Scram(ScramMechanism),
}

impl SaslMechanism {
    /// The mechanism's SASL name.
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::Scram(scram) => scram.name(),
        }
    }

    /// The mechanism named `name` (exact, as Kafka matches handshake names).
    pub fn from_name(name: &str) -> Option<Self> {
        if name == "PLAIN" {
            return Some(SaslMechanism::Plain);
        }
        ScramMechanism::from_name(name).map(SaslMechanism::Scram)
    }
}

/// PLAIN users and their passwords; printed without the passwords.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PlainUsers(BTreeMap<String, String>);

impl PlainUsers {
    /// The password of `user`, if configured.
    pub fn password(&self, user: &str) -> Option<&str> {
        self.0.get(user).map(String::as_str)
    }

    /// The configured user names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

impl std::fmt::Debug for PlainUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// What a SASL listener accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslSettings {
    /// Enabled mechanisms, in configured order (the handshake lists them in this order).
    pub mechanisms: Vec<SaslMechanism>,
    /// PLAIN users (empty when PLAIN is not enabled).
    pub plain_users: PlainUsers,
    /// `sasl.server.max.receive.size`: the largest frame accepted before authentication.
    pub max_receive_size: i32,
    /// `connection.failed.authentication.delay.ms`: how long a failed connection stays open
    /// after its error response, so a client cannot retry in a tight loop.
    pub failed_authentication_delay_ms: u64,
    /// `connections.max.reauth.ms` (0 = sessions never expire): the session lifetime sent in
    /// SaslAuthenticate, after which a connection must re-authenticate (KIP-368).
    pub reauth_ms: i64,
}

/// `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    None,
    /// Asked for; a client without one is `User:ANONYMOUS`.
    Requested,
    /// A client without a trusted certificate fails the handshake.
    Required,
}

/// What a TLS listener serves with: PEM text read at start-up.
#[derive(Clone)]
pub struct TlsSettings {
    /// The certificate chain (PEM), leaf first.
    pub keystore_chain: String,
    /// The private key (PEM, unencrypted).
    pub keystore_key: String,
    /// Trusted CA certificates (PEM), for client certificates.
    pub truststore: Option<String>,
    /// `ssl.client.auth`.
    pub client_auth: ClientAuth,
    /// `ssl.principal.mapping.rules`.
    pub principal_rules: Vec<crate::network::tls::PrincipalRule>,
    /// The keystore file, when the keystore is one (watched for changes).
    pub keystore_path: Option<std::path::PathBuf>,
    /// The truststore file, when the truststore is one (watched for changes).
    pub truststore_path: Option<std::path::PathBuf>,
}

impl TlsSettings {
    /// These settings with the stores read again from their files.
    pub fn reread(&self) -> Result<TlsSettings, String> {
        let read = |path: &std::path::Path| {
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))
        };
        let mut next = self.clone();
        if let Some(path) = &self.keystore_path {
            let text = read(path)?;
            // The key lives in the keystore file unless it was given inline.
            if self.keystore_key == self.keystore_chain {
                next.keystore_key = text.clone();
            }
            next.keystore_chain = text;
        }
        if let Some(path) = &self.truststore_path {
            next.truststore = Some(read(path)?);
        }
        Ok(next)
    }
}

// The key is a secret: debug output names the settings, not the PEM text.
impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("client_auth", &self.client_auth)
            .field("truststore", &self.truststore.is_some())
            .finish_non_exhaustive()
    }
}

/// The security of one listener.
#[derive(Clone, Debug)]
pub struct ListenerSecurity {
    /// Its protocol.
    pub protocol: SecurityProtocol,
    /// SASL settings, for SASL protocols.
    pub sasl: Option<Arc<SaslSettings>>,
    /// TLS settings, for SSL protocols.
    pub tls: Option<Arc<TlsSettings>>,
}

impl ListenerSecurity {
    /// A PLAINTEXT listener.
    pub fn plaintext() -> Self {
        ListenerSecurity {
            protocol: SecurityProtocol::Plaintext,
            sasl: None,
            tls: None,
        }
    }
}

fn invalid(key: String, value: &str, reason: String) -> ConfigError {
    ConfigError::InvalidListenerValue {
        key,
        value: value.to_owned(),
        reason,
    }
}

/// Kafka's per-listener key: `listener.name.<lower-case listener>.<suffix>`.
pub fn listener_key(listener: &str, suffix: &str) -> String {
    format!("listener.name.{}.{suffix}", listener.to_ascii_lowercase())
}

/// Keys under `listener.name.<l>.` that Gregor acts on.
pub fn is_implemented_listener_key(key: &str) -> bool {
    let Some(rest) = key.strip_prefix("listener.name.") else {
        return false;
    };
    let Some((_, suffix)) = rest.split_once('.') else {
        return false;
    };
    suffix == "sasl.enabled.mechanisms"
        || suffix == "plain.sasl.jaas.config"
        || suffix == "scram-sha-256.sasl.jaas.config"
        || suffix == "scram-sha-512.sasl.jaas.config"
        || TLS_KEYS.contains(&suffix)
}

/// The `ssl.*` keys Gregor reads, node-wide or per listener.
pub const TLS_KEYS: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.principal.mapping.rules",
];

/// The value of `key` for listener `name`: `listener.name.<l>.<key>`, else the node-wide key.
fn listener_or_node<'a>(
    originals: &'a BTreeMap<String, String>,
    name: &str,
    key: &str,
) -> Option<(String, &'a str)> {
    let prefixed = listener_key(name, key);
    match originals.get(&prefixed) {
        Some(value) => Some((prefixed, value.as_str())),
        None => originals
            .get(key)
            .map(|value| (key.to_owned(), value.as_str())),
    }
}

/// PEM text from `<inline key>` or the file named by `<location key>`.
fn pem(
    originals: &BTreeMap<String, String>,
    name: &str,
    inline: &str,
    location: &str,
) -> Result<Option<String>, ConfigError> {
    if let Some((_, text)) = listener_or_node(originals, name, inline) {
        return Ok(Some(text.to_owned()));
    }
    match listener_or_node(originals, name, location) {
        Some((key, path)) => std::fs::read_to_string(path)
            .map(Some)
            .map_err(|e| invalid(key, path, format!("cannot read the PEM file: {e}"))),
        None => Ok(None),
    }
}

/// The TLS settings of listener `name` (Kafka's PEM key stores).
fn tls_settings(
    name: &str,
    protocol: SecurityProtocol,
    originals: &BTreeMap<String, String>,
) -> Result<TlsSettings, ConfigError> {
    for store in ["ssl.keystore.type", "ssl.truststore.type"] {
        if let Some((key, kind)) = listener_or_node(originals, name, store) {
            if !kind.eq_ignore_ascii_case("PEM") {
                return Err(invalid(
                    key,
                    kind,
                    "Gregor reads PEM stores only (convert JKS/PKCS12 with keytool or openssl)"
                        .to_owned(),
                ));
            }
        }
    }
    let location = listener_key(name, "ssl.keystore.location");
    let keystore = pem(
        originals,
        name,
        "ssl.keystore.certificate.chain",
        "ssl.keystore.location",
    )?
    .ok_or_else(|| {
        invalid(
            location.clone(),
            "",
            format!(
                "listener {name} uses {} and needs a PEM keystore",
                protocol.name()
            ),
        )
    })?;
    // A keystore file holds the key and its chain; inline, they are two keys.
    let key = match listener_or_node(originals, name, "ssl.keystore.key") {
        Some((_, key)) => key.to_owned(),
        None => keystore.clone(),
    };
    let truststore = pem(
        originals,
        name,
        "ssl.truststore.certificates",
        "ssl.truststore.location",
    )?;
    // Kafka honours ssl.client.auth on SASL_SSL listeners only with the listener prefix.
    let client_auth = match protocol {
        SecurityProtocol::SaslSsl => originals
            .get(&listener_key(name, "ssl.client.auth"))
            .map(|v| (listener_key(name, "ssl.client.auth"), v.as_str())),
        _ => listener_or_node(originals, name, "ssl.client.auth"),
    };
    let client_auth = match client_auth {
        None => ClientAuth::None,
        Some((key, value)) => match value.trim().to_ascii_lowercase().as_str() {
            "none" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            _ => {
                return Err(invalid(
                    key,
                    value,
                    "expected required, requested or none".to_owned(),
                ))
            }
        },
    };
    let principal_rules = match listener_or_node(originals, name, "ssl.principal.mapping.rules") {
        Some((key, text)) => crate::network::tls::parse_principal_rules(text)
            .map_err(|reason| invalid(key, text, reason))?,
        None => vec![crate::network::tls::PrincipalRule::Default],
    };
    let path_of = |inline: &str, location: &str| {
        listener_or_node(originals, name, inline)
            .is_none()
            .then(|| listener_or_node(originals, name, location))
            .flatten()
            .map(|(_, path)| std::path::PathBuf::from(path))
    };
    Ok(TlsSettings {
        keystore_chain: keystore,
        keystore_key: key,
        truststore,
        client_auth,
        principal_rules,
        keystore_path: path_of("ssl.keystore.certificate.chain", "ssl.keystore.location"),
        truststore_path: path_of("ssl.truststore.certificates", "ssl.truststore.location"),
    })
}

/// The security of the listener `name` with protocol `protocol`.
pub fn listener_security(
    name: &str,
    protocol: SecurityProtocol,
    originals: &BTreeMap<String, String>,
    defaults: &SaslDefaults,
) -> Result<ListenerSecurity, ConfigError> {
    let tls = match protocol {
        SecurityProtocol::Ssl | SecurityProtocol::SaslSsl => {
            Some(Arc::new(tls_settings(name, protocol, originals)?))
        }
        _ => None,
    };
    if !protocol.is_sasl() {
        return Ok(ListenerSecurity {
            protocol,
            sasl: None,
            tls,
        });
    }
    let mechanisms_key = listener_key(name, "sasl.enabled.mechanisms");
    let (key, text) = match originals.get(&mechanisms_key) {
        Some(text) => (mechanisms_key, text.clone()),
        None => (
            "sasl.enabled.mechanisms".to_owned(),
            defaults.enabled_mechanisms.clone(),
        ),
    };
    let mut mechanisms = Vec::new();
    for item in text.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let mechanism = SaslMechanism::from_name(item).ok_or_else(|| {
            invalid(
                key.clone(),
                &text,
                format!(
                    "listener {name}: SASL mechanism {item} is not supported; Gregor serves PLAIN, \
                     SCRAM-SHA-256 and SCRAM-SHA-512"
                ),
            )
        })?;
        if !mechanisms.contains(&mechanism) {
            mechanisms.push(mechanism);
        }
    }
    if mechanisms.is_empty() {
        return Err(invalid(
            key,
            &text,
            format!("listener {name} uses SASL but enables no mechanism"),
        ));
    }
    let jaas_key = listener_key(name, "plain.sasl.jaas.config");
    let plain_users = match originals.get(&jaas_key) {
        Some(text) => plain_users(text).map_err(|reason| {
            // The value holds passwords: the error never repeats it.
            invalid(jaas_key.clone(), crate::config_keys::HIDDEN, reason)
        })?,
        None if mechanisms.contains(&SaslMechanism::Plain) => {
            return Err(invalid(
                jaas_key,
                "",
                format!(
                    "listener {name} enables PLAIN, which needs \
                     org.apache.kafka.common.security.plain.PlainLoginModule required \
                     user_<name>=\"<password>\" ...;"
                ),
            ))
        }
        None => PlainUsers::default(),
    };
    Ok(ListenerSecurity {
        protocol,
        sasl: Some(Arc::new(SaslSettings {
            mechanisms,
            plain_users,
            max_receive_size: defaults.max_receive_size,
            failed_authentication_delay_ms: defaults.failed_authentication_delay_ms,
            reauth_ms: defaults.reauth_ms,
        })),
        tls,
    })
}

/// The username and password this node authenticates with when it connects to a peer.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientSasl {
    /// The mechanism (`sasl.mechanism.controller.protocol` or
    /// `sasl.mechanism.inter.broker.protocol`).
    pub mechanism: SaslMechanism,
    /// The JAAS entry's `username`.
    pub username: String,
    /// The JAAS entry's `password`.
    pub password: String,
}

// The password is a secret: debug output names the mechanism and the user only.
impl std::fmt::Debug for ClientSasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSasl")
            .field("mechanism", &self.mechanism.name())
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The PEM stores a TLS connection to a peer uses: the CAs it trusts, and the certificate it
/// presents when the peer asks for one (mutual TLS).
#[derive(Clone)]
pub struct ClientTls {
    /// Trusted CA certificates (PEM).
    pub truststore: String,
    /// The certificate chain and private key (PEM), when the listener has a keystore.
    pub keystore: Option<(String, String)>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("keystore", &self.keystore.is_some())
            .finish_non_exhaustive()
    }
}

/// How this node secures the connections it opens to one listener of its peers: the
/// controller listener (quorum RPCs, joins, forwarding) or the inter-broker listener (replica
/// fetching), as Kafka's nodes use the listener's protocol, the configured mechanism and the
/// credentials of the listener's JAAS entry.
#[derive(Clone, Debug)]
pub struct ClientSecurity {
    /// The listener name connected to.
    pub listener: String,
    /// Its protocol.
    pub protocol: SecurityProtocol,
    /// SASL credentials, for SASL protocols.
    pub sasl: Option<ClientSasl>,
    /// TLS stores, for SSL protocols.
    pub tls: Option<ClientTls>,
}

impl ClientSecurity {
    /// Plain TCP without authentication.
    pub fn plaintext() -> Self {
        ClientSecurity {
            listener: String::new(),
            protocol: SecurityProtocol::Plaintext,
            sasl: None,
            tls: None,
        }
    }
}

/// The security of connections to listener `name` (protocol `protocol`) of a peer:
/// `mechanism_key` names the key that chose `mechanism` (`sasl.mechanism.controller.protocol`
/// or `sasl.mechanism.inter.broker.protocol`); the username and password come from
/// `listener.name.<l>.<mechanism>.sasl.jaas.config`, the trust and key stores from the
/// listener's (or the node's) `ssl.*` keys.
pub fn client_security(
    name: &str,
    protocol: SecurityProtocol,
    mechanism_key: &str,
    mechanism: &str,
    originals: &BTreeMap<String, String>,
) -> Result<ClientSecurity, ConfigError> {
    let sasl = if protocol.is_sasl() {
        let chosen = SaslMechanism::from_name(mechanism.trim()).ok_or_else(|| {
            invalid(
                mechanism_key.to_owned(),
                mechanism,
                format!(
                    "listener {name} uses {}: Gregor's nodes authenticate to each other with \
                     PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
                    protocol.name()
                ),
            )
        })?;
        let jaas_key = listener_key(
            name,
            &format!("{}.sasl.jaas.config", mechanism_lower(chosen)),
        );
        let text = originals.get(&jaas_key).ok_or_else(|| {
            invalid(
                jaas_key.clone(),
                "",
                format!(
                    "connections to listener {name} authenticate with {}, which needs \
                     {} required username=\"<user>\" password=\"<password>\";",
                    chosen.name(),
                    login_module(chosen)
                ),
            )
        })?;
        // The value holds passwords: errors never repeat it.
        let hidden = |reason: String| invalid(jaas_key.clone(), crate::config_keys::HIDDEN, reason);
        let entry = parse_jaas(text).map_err(hidden)?;
        if entry.module != login_module(chosen) {
            return Err(hidden(format!(
                "expected {}, found {}",
                login_module(chosen),
                entry.module
            )));
        }
        let option = |key: &str| {
            entry
                .options
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .ok_or_else(|| hidden(format!("the entry has no {key} option")))
        };
        Some(ClientSasl {
            mechanism: chosen,
            username: option("username")?,
            password: option("password")?,
        })
    } else {
        None
    };
    let tls = match protocol {
        SecurityProtocol::Ssl | SecurityProtocol::SaslSsl => {
            let truststore = pem(
                originals,
                name,
                "ssl.truststore.certificates",
                "ssl.truststore.location",
            )?
            .ok_or_else(|| {
                invalid(
                    listener_key(name, "ssl.truststore.location"),
                    "",
                    format!(
                        "connections to listener {name} use {} and need a PEM truststore",
                        protocol.name()
                    ),
                )
            })?;
            let chain = pem(
                originals,
                name,
                "ssl.keystore.certificate.chain",
                "ssl.keystore.location",
            )?;
            let keystore = chain.map(|chain| {
                let key = listener_or_node(originals, name, "ssl.keystore.key")
                    .map_or_else(|| chain.clone(), |(_, key)| key.to_owned());
                (chain, key)
            });
            Some(ClientTls {
                truststore,
                keystore,
            })
        }
        _ => None,
    };
    Ok(ClientSecurity {
        listener: name.to_owned(),
        protocol,
        sasl,
        tls,
    })
}

/// The mechanism as it appears in Kafka's per-mechanism keys (`scram-sha-512.sasl.jaas.config`).
fn mechanism_lower(mechanism: SaslMechanism) -> String {
    mechanism.name().to_ascii_lowercase()
}

/// The JAAS login module Kafka's clients use for `mechanism`.
fn login_module(mechanism: SaslMechanism) -> &'static str {
    match mechanism {
        SaslMechanism::Plain => "org.apache.kafka.common.security.plain.PlainLoginModule",
        SaslMechanism::Scram(_) => "org.apache.kafka.common.security.scram.ScramLoginModule",
    }
}

/// The node-wide SASL settings every SASL listener starts from.
#[derive(Clone, Debug)]
pub struct SaslDefaults {
    /// `sasl.enabled.mechanisms`.
    pub enabled_mechanisms: String,
    /// `sasl.server.max.receive.size`.
    pub max_receive_size: i32,
    /// `connection.failed.authentication.delay.ms`.
    pub failed_authentication_delay_ms: u64,
    /// `connections.max.reauth.ms`.
    pub reauth_ms: i64,
}

/// The `user_<name>="<password>"` options of a `PlainLoginModule` JAAS entry.
fn plain_users(text: &str) -> Result<PlainUsers, String> {
    let entry = parse_jaas(text)?;
    if entry.module != "org.apache.kafka.common.security.plain.PlainLoginModule" {
        return Err(format!(
            "expected org.apache.kafka.common.security.plain.PlainLoginModule, found {}",
            entry.module
        ));
    }
    let users: BTreeMap<String, String> = entry
        .options
        .into_iter()
        .filter_map(|(key, value)| Some((key.strip_prefix("user_")?.to_owned(), value)))
        .collect();
    Ok(PlainUsers(users))
}

/// One JAAS login module entry: `<module> <flag> [key=value ...];`.
#[derive(Debug, PartialEq, Eq)]
struct JaasEntry {
    module: String,
    options: Vec<(String, String)>,
}

/// Parses one entry of Kafka's `sasl.jaas.config` grammar (JaasConfig: a module class, a
/// control flag, options whose values are quoted or bare tokens, a closing `;`). Hand-written:
/// the grammar is a few tokens and no crate parses it.
fn parse_jaas(text: &str) -> Result<JaasEntry, String> {
    let tokens = jaas_tokens(text)?;
    let mut tokens = tokens.into_iter().peekable();
    let module = match tokens.next() {
        Some(JaasToken::Word(word)) => word,
        _ => return Err("expected a login module class".to_owned()),
    };
    match tokens.next() {
        Some(JaasToken::Word(flag))
            if ["required", "requisite", "sufficient", "optional"]
                .contains(&flag.to_ascii_lowercase().as_str()) => {}
        _ => {
            return Err(format!(
            "expected a control flag (required, requisite, sufficient or optional) after {module}"
        ))
        }
    }
    let mut options = Vec::new();
    loop {
        match tokens.next() {
            Some(JaasToken::Semicolon) => break,
            Some(JaasToken::Word(key)) => {
                if tokens.next() != Some(JaasToken::Equals) {
                    return Err(format!("expected = after option {key}"));
                }
                match tokens.next() {
                    Some(JaasToken::Word(value)) | Some(JaasToken::Quoted(value)) => {
                        options.push((key, value))
                    }
                    _ => return Err(format!("expected a value for option {key}")),
                }
            }
            _ => return Err("expected key=value options ending with ;".to_owned()),
        }
    }
    if tokens.next().is_some() {
        return Err("expected exactly one login module".to_owned());
    }
    Ok(JaasEntry { module, options })
}

#[derive(Debug, PartialEq, Eq)]
enum JaasToken {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

fn jaas_tokens(text: &str) -> Result<Vec<JaasToken>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '=' => {
                chars.next();
                tokens.push(JaasToken::Equals);
            }
            ';' => {
                chars.next();
                tokens.push(JaasToken::Semicolon);
            }
            '"' => {
                chars.next();
                let mut value = String::new();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(escaped) => value.push(escaped),
                            None => return Err("unterminated quoted value".to_owned()),
                        },
                        Some(other) => value.push(other),
                        None => return Err("unterminated quoted value".to_owned()),
                    }
                }
                tokens.push(JaasToken::Quoted(value));
            }
            _ => {
                let mut word = String::new();
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || c == '=' || c == ';' || c == '"' {
                        break;
                    }
                    word.push(c);
                    chars.next();
                }
                tokens.push(JaasToken::Word(word));
            }
        }
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
        username=\"admin\" password=\"admin-secret\" user_admin=\"admin-secret\" \
        user_alice=\"al;ce=\\\"pw\\\"\" user_bob=bare;";

    fn defaults(mechanisms: &str) -> SaslDefaults {
        SaslDefaults {
            enabled_mechanisms: mechanisms.to_owned(),
            max_receive_size: 524288,
            failed_authentication_delay_ms: 100,
            reauth_ms: 0,
        }
    }

    #[test]
    fn plain_users_come_from_the_jaas_options() -> Result<(), String> {
        let users = plain_users(PLAIN)?;
        assert_eq!(users.password("admin"), Some("admin-secret"));
        assert_eq!(users.password("alice"), Some("al;ce=\"pw\""));
        assert_eq!(users.password("bob"), Some("bare"));
        assert_eq!(users.password("username"), None);
        assert_eq!(format!("{users:?}"), "{\"admin\", \"alice\", \"bob\"}");
        Ok(())
    }

    #[test]
    fn bad_jaas_entries_are_refused() {
        for text in [
            "",
            "org.apache.kafka.common.security.plain.PlainLoginModule",
            "org.apache.kafka.common.security.plain.PlainLoginModule mandatory user_a=\"b\";",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\"",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_a \"b\";",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b;",
            "org.apache.kafka.common.security.scram.ScramLoginModule required user_a=\"b\";",
        ] {
            assert!(plain_users(text).is_err(), "{text}");
        }
    }

    #[test]
    fn a_sasl_listener_takes_its_mechanisms_and_users() -> Result<(), ConfigError> {
        let originals = BTreeMap::from([
            (
                "listener.name.sasl.sasl.enabled.mechanisms".to_owned(),
                "SCRAM-SHA-512, PLAIN".to_owned(),
            ),
            (
                "listener.name.sasl.plain.sasl.jaas.config".to_owned(),
                PLAIN.to_owned(),
            ),
        ]);
        let security = listener_security(
            "SASL",
            SecurityProtocol::SaslPlaintext,
            &originals,
            &defaults("GSSAPI"),
        )?;
        let sasl = security.sasl.as_deref().map(|s| s.mechanisms.clone());
        assert_eq!(
            sasl,
            Some(vec![
                SaslMechanism::Scram(ScramMechanism::Sha512),
                SaslMechanism::Plain
            ])
        );
        Ok(())
    }

    #[test]
    fn unsupported_or_missing_settings_name_the_key() {
        let none = BTreeMap::new();
        let error = listener_security(
            "SASL",
            SecurityProtocol::SaslPlaintext,
            &none,
            &defaults("GSSAPI"),
        )
        .err()
        .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some(
                "Invalid value GSSAPI for configuration sasl.enabled.mechanisms: listener SASL: \
                 SASL mechanism GSSAPI is not supported; Gregor serves PLAIN, SCRAM-SHA-256 and \
                 SCRAM-SHA-512"
            )
        );
        let error = listener_security(
            "SASL",
            SecurityProtocol::SaslPlaintext,
            &none,
            &defaults("PLAIN"),
        )
        .err()
        .map(|e| e.to_string());
        assert!(error.is_some_and(|e| e.contains("listener.name.sasl.plain.sasl.jaas.config")));
        let secret = BTreeMap::from([(
            "listener.name.sasl.plain.sasl.jaas.config".to_owned(),
            "Nope required user_a=\"s3cret\";".to_owned(),
        )]);
        let error = listener_security(
            "SASL",
            SecurityProtocol::SaslPlaintext,
            &secret,
            &defaults("PLAIN"),
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(!error.contains("s3cret"), "{error}");
    }

    #[test]
    fn listener_keys_gregor_implements() {
        assert!(is_implemented_listener_key(
            "listener.name.sasl.sasl.enabled.mechanisms"
        ));
        assert!(is_implemented_listener_key(
            "listener.name.sasl.plain.sasl.jaas.config"
        ));
        assert!(is_implemented_listener_key(
            "listener.name.ssl.ssl.keystore.location"
        ));
        assert!(!is_implemented_listener_key(
            "listener.name.ssl.ssl.cipher.suites"
        ));
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// PLAIN users from (name, password) pairs.
    pub(crate) fn plain_users(pairs: &[(&str, &str)]) -> PlainUsers {
        PlainUsers(
            pairs
                .iter()
                .map(|(user, password)| ((*user).to_owned(), (*password).to_owned()))
                .collect(),
        )
    }
}
