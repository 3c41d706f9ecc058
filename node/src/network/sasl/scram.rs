//! The server side of SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka's `ScramSaslServer` runs
//! it: client-first → server-first → client-final → server-final, against credentials from the
//! metadata image. No channel binding (gs2 flag `n` only), no SASLprep.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use gregor_publishers::scram::{
    constant_time_eq, xor, ScramCredential, ScramMechanism, MIN_ITERATIONS,
};
use rand::Rng;

use super::AuthError;

/// Where a SCRAM exchange is.
pub(super) enum ScramServer {
    /// Waiting for client-first.
    Start,
    /// Sent server-first; waiting for client-final.
    SentServerFirst {
        username: String,
        credential: ScramCredential,
        client_first_bare: String,
        server_first: String,
        nonce: String,
        gs2_header: String,
    },
}

/// One step's outcome.
pub(super) enum ScramStep {
    /// Send this challenge and wait for the next token.
    Challenge(Vec<u8>),
    /// Authenticated `username`; send the server-final message.
    Done { username: String, reply: Vec<u8> },
}

impl ScramServer {
    /// Handles one client token; `lookup` finds a user's credential for `mechanism`.
    pub(super) fn step(
        &mut self,
        mechanism: ScramMechanism,
        token: &[u8],
        lookup: &dyn Fn(&str, ScramMechanism) -> Option<ScramCredential>,
    ) -> Result<ScramStep, AuthError> {
        let text = std::str::from_utf8(token)
            .map_err(|_| AuthError::internal("SCRAM message is not UTF-8"))?;
        match std::mem::replace(self, ScramServer::Start) {
            ScramServer::Start => {
                let first = ClientFirst::parse(text)?;
                if first.token_auth {
                    // Delegation tokens are not implemented: no token credential exists.
                    return Err(AuthError::internal("Token authentication is not supported"));
                }
                let credential = lookup(&first.username, mechanism).ok_or_else(|| {
                    AuthError::internal("Authentication failed: Invalid user credentials")
                })?;
                if !first.authorization_id.is_empty() && first.authorization_id != first.username {
                    return Err(AuthError::client(
                        "Authentication failed: Client requested an authorization id that is different from username",
                    ));
                }
                if credential.iterations < MIN_ITERATIONS {
                    return Err(AuthError::internal(format!(
                        "Iterations {} is less than the minimum {MIN_ITERATIONS} for {mechanism}",
                        credential.iterations
                    )));
                }
                let nonce = format!("{}{}", first.nonce, server_nonce());
                let server_first = format!(
                    "r={nonce},s={},i={}",
                    BASE64.encode(&credential.salt),
                    credential.iterations
                );
                let challenge = server_first.clone().into_bytes();
                *self = ScramServer::SentServerFirst {
                    username: first.username,
                    credential,
                    client_first_bare: first.bare,
                    server_first,
                    nonce,
                    gs2_header: first.gs2_header,
                };
                Ok(ScramStep::Challenge(challenge))
            }
            ScramServer::SentServerFirst {
                username,
                credential,
                client_first_bare,
                server_first,
                nonce,
                gs2_header,
            } => {
                let (without_proof, proof) = text
                    .rsplit_once(",p=")
                    .ok_or_else(|| AuthError::internal("Invalid SCRAM client final message"))?;
                let mut attributes = without_proof.split(',');
                let channel = attributes
                    .next()
                    .and_then(|a| a.strip_prefix("c="))
                    .ok_or_else(|| AuthError::internal("Invalid SCRAM client final message"))?;
                let final_nonce = attributes
                    .next()
                    .and_then(|a| a.strip_prefix("r="))
                    .ok_or_else(|| AuthError::internal("Invalid SCRAM client final message"))?;
                // Kafka checks that the nonce ends with the server-first nonce: librdkafka
                // before 2.x's fix (kcat 1.7.1 here) repeats its client nonce in front of it.
                if !final_nonce.ends_with(&nonce) {
                    return Err(AuthError::internal(
                        "Invalid client nonce in the final client message.",
                    ));
                }
                if BASE64.decode(channel).ok().as_deref() != Some(gs2_header.as_bytes()) {
                    return Err(AuthError::internal("Invalid SCRAM channel binding"));
                }
                let proof = BASE64
                    .decode(proof)
                    .map_err(|_| AuthError::internal("Invalid SCRAM client proof"))?;
                let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
                let signature = mechanism.hmac(&credential.stored_key, auth_message.as_bytes());
                let client_key = xor(&proof, &signature);
                let verified = proof.len() == signature.len()
                    && constant_time_eq(&mechanism.hash(&client_key), &credential.stored_key);
                if !verified {
                    return Err(AuthError::internal("Invalid client credentials"));
                }
                let server_signature =
                    mechanism.hmac(&credential.server_key, auth_message.as_bytes());
                Ok(ScramStep::Done {
                    username,
                    reply: format!("v={}", BASE64.encode(server_signature)).into_bytes(),
                })
            }
        }
    }
}

/// Kafka's server nonce is a random 130-bit number in base 36; 26 base-36 digits carry as much.
fn server_nonce() -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut random = rand::rng();
    (0..26)
        .map(|_| char::from(DIGITS[random.random_range(0..DIGITS.len())]))
        .collect()
}

/// A parsed client-first message.
#[derive(Debug, PartialEq, Eq)]
struct ClientFirst {
    gs2_header: String,
    authorization_id: String,
    username: String,
    nonce: String,
    /// Everything after the gs2 header: it enters the AuthMessage as sent.
    bare: String,
    token_auth: bool,
}

impl ClientFirst {
    /// `n,[a=authzid],[m=...,]n=saslname,r=nonce[,ext=value...]`.
    fn parse(text: &str) -> Result<Self, AuthError> {
        let invalid = || AuthError::internal(format!("Invalid SCRAM client first message {text}"));
        let rest = text.strip_prefix("n,").ok_or_else(invalid)?;
        let (authzid, bare) = rest.split_once(',').ok_or_else(invalid)?;
        let authorization_id = match authzid {
            "" => String::new(),
            authzid => {
                unescape(authzid.strip_prefix("a=").ok_or_else(invalid)?).ok_or_else(invalid)?
            }
        };
        let mut attributes = bare.split(',').peekable();
        if attributes.peek().is_some_and(|a| a.starts_with("m=")) {
            attributes.next();
        }
        let username = attributes
            .next()
            .and_then(|a| a.strip_prefix("n="))
            .and_then(unescape)
            .filter(|name| !name.is_empty())
            .ok_or_else(invalid)?;
        let nonce = attributes
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .filter(|nonce| {
                !nonce.is_empty()
                    && nonce
                        .bytes()
                        .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
            })
            .ok_or_else(invalid)?;
        let mut token_auth = false;
        for extension in attributes {
            let (key, value) = extension.split_once('=').ok_or_else(invalid)?;
            if key == "tokenauth" && value.eq_ignore_ascii_case("true") {
                token_auth = true;
            }
        }
        Ok(ClientFirst {
            gs2_header: format!("n,{authzid},"),
            authorization_id,
            username,
            nonce: nonce.to_owned(),
            bare: bare.to_owned(),
            token_auth,
        })
    }
}

/// Undoes saslname escaping (`=2C` → `,`, `=3D` → `=`); any other `=` is invalid.
fn unescape(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3)?;
        out.push(match escape {
            "=2C" => ',',
            "=3D" => '=',
            _ => return None,
        });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MECHANISM: ScramMechanism = ScramMechanism::Sha256;

    fn credential() -> ScramCredential {
        MECHANISM.credential(b"pencil", b"0123456789abcdef".to_vec(), 4096)
    }

    fn lookup(user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        (user == "user" && mechanism == MECHANISM).then(credential)
    }

    /// The client side of RFC 5802 for `password`, given the server-first message.
    fn client_final(
        client_first_bare: &str,
        server_first: &str,
        password: &[u8],
        nonce_prefix: &str,
    ) -> Result<String, String> {
        let attribute = |key: &str| {
            server_first
                .split(',')
                .find_map(|a| a.strip_prefix(key))
                .map(str::to_owned)
                .ok_or(format!("no {key} in {server_first}"))
        };
        let nonce = attribute("r=")?;
        let salt = BASE64.decode(attribute("s=")?).map_err(|e| e.to_string())?;
        let iterations: u32 = attribute("i=")?.parse().map_err(|_| "iterations")?;
        let salted = MECHANISM.salted_password(password, &salt, iterations);
        let without_proof = format!("c=biws,r={nonce_prefix}{nonce}");
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_key = MECHANISM.client_key(&salted);
        let signature = MECHANISM.hmac(&MECHANISM.stored_key(&client_key), auth_message.as_bytes());
        Ok(format!(
            "{without_proof},p={}",
            BASE64.encode(xor(&client_key, &signature))
        ))
    }

    fn exchange(user: &str, password: &[u8]) -> Result<String, String> {
        exchange_with(user, password, "")
    }

    fn exchange_with(user: &str, password: &[u8], nonce_prefix: &str) -> Result<String, String> {
        let mut server = ScramServer::Start;
        let bare = format!("n={user},r=fyko+d2lbbFgONRv9qkxdawL");
        let first = server
            .step(MECHANISM, format!("n,,{bare}").as_bytes(), &lookup)
            .map_err(|e| e.client_message(MECHANISM.name()))?;
        let ScramStep::Challenge(challenge) = first else {
            return Err("no challenge".to_owned());
        };
        let server_first = String::from_utf8(challenge).map_err(|e| e.to_string())?;
        assert!(server_first.starts_with("r=fyko+d2lbbFgONRv9qkxdawL"));
        let last = client_final(&bare, &server_first, password, nonce_prefix)?;
        match server
            .step(MECHANISM, last.as_bytes(), &lookup)
            .map_err(|e| e.detail)?
        {
            ScramStep::Done { username, reply } => {
                assert!(reply.starts_with(b"v="));
                Ok(username)
            }
            ScramStep::Challenge(_) => Err("a second challenge".to_owned()),
        }
    }

    #[test]
    fn a_right_password_authenticates_and_a_wrong_one_does_not() {
        assert_eq!(exchange("user", b"pencil"), Ok("user".to_owned()));
        assert_eq!(
            exchange("user", b"pencils"),
            Err("Invalid client credentials".to_owned())
        );
        // Unknown users get the message that does not tell them apart from a wrong password.
        assert_eq!(
            exchange("nobody", b"pencil"),
            Err("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256".to_owned())
        );
    }

    /// librdkafka 2.0 (kcat 1.7.1) sends its client nonce again in front of the server's
    /// nonce; Kafka accepts a final nonce that ends with the server's.
    #[test]
    fn a_repeated_client_nonce_is_accepted_as_kafka_accepts_it() {
        assert_eq!(
            exchange_with("user", b"pencil", "fyko+d2lbbFgONRv9qkxdawL"),
            Ok("user".to_owned())
        );
    }

    #[test]
    fn client_first_messages_parse_as_kafka_reads_them() -> Result<(), String> {
        let first = ClientFirst::parse("n,a=us=2Cer,n=us=2Cer,r=abc,tokenauth=true")
            .map_err(|e| e.detail)?;
        assert_eq!(first.authorization_id, "us,er");
        assert_eq!(first.username, "us,er");
        assert_eq!(first.nonce, "abc");
        assert_eq!(first.bare, "n=us=2Cer,r=abc,tokenauth=true");
        assert_eq!(first.gs2_header, "n,a=us=2Cer,");
        assert!(first.token_auth);
        for bad in [
            "y,,n=user,r=abc",
            "p=tls-unique,,n=user,r=abc",
            "n,,n=,r=abc",
            "n,,n=us=er,r=abc",
            "n,,n=user",
            "n,,r=abc,n=user",
            "n,x=1,n=user,r=abc",
            "",
        ] {
            assert!(ClientFirst::parse(bad).is_err(), "{bad}");
        }
        Ok(())
    }

    #[test]
    fn a_wrong_nonce_or_channel_binding_fails() -> Result<(), String> {
        for tamper in ["r=", "c="] {
            let mut server = ScramServer::Start;
            let bare = "n=user,r=abc";
            let ScramStep::Challenge(challenge) = server
                .step(MECHANISM, format!("n,,{bare}").as_bytes(), &lookup)
                .map_err(|e| e.detail)?
            else {
                return Err("no challenge".to_owned());
            };
            let server_first = String::from_utf8(challenge).map_err(|e| e.to_string())?;
            let last = client_final(bare, &server_first, b"pencil", "")?;
            let tampered = if tamper == "r=" {
                last.replacen(",r=abc", ",r=abd", 1)
            } else {
                last.replacen("c=biws", "c=eSws", 1)
            };
            assert!(server
                .step(MECHANISM, tampered.as_bytes(), &lookup)
                .is_err());
        }
        Ok(())
    }
}
