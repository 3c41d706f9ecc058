//! SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer` checks it against the JAAS users.

use gregor_publishers::scram::constant_time_eq;

use super::AuthError;
use crate::config_security::PlainUsers;

/// Checks one PLAIN token (`[authzid] NUL authcid NUL password`); the user name on success.
pub(super) fn authenticate(token: &[u8], users: &PlainUsers) -> Result<String, AuthError> {
    // As Kafka's `PlainSaslServer`: `new String(response, UTF_8)`.
    let text = kafka_protocol::protocol::java_utf8_lossy(token);
    let parts: Vec<&str> = text.split('\0').collect();
    let [authorization_id, username, password] = parts[..] else {
        return Err(AuthError::internal(format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            parts.len()
        )));
    };
    if username.is_empty() {
        return Err(AuthError::client(
            "Authentication failed: username not specified",
        ));
    }
    if password.is_empty() {
        return Err(AuthError::client(
            "Authentication failed: password not specified",
        ));
    }
    // Compared in constant time; an unknown user costs the same comparison.
    let expected = users.password(username);
    let matches = constant_time_eq(expected.unwrap_or(password).as_bytes(), password.as_bytes())
        && expected.is_some();
    if !matches {
        return Err(AuthError::client(
            "Authentication failed: Invalid username or password",
        ));
    }
    if !authorization_id.is_empty() && authorization_id != username {
        return Err(AuthError::client(
            "Authentication failed: Client requested an authorization id that is different from username",
        ));
    }
    Ok(username.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> PlainUsers {
        crate::config_security::tests_support::plain_users(&[("alice", "alice-secret")])
    }

    fn message(result: Result<String, AuthError>) -> String {
        match result {
            Ok(user) => user,
            Err(error) => error.client_message("PLAIN"),
        }
    }

    #[test]
    fn plain_tokens_as_kafka_checks_them() {
        let users = users();
        assert_eq!(
            message(authenticate(b"\0alice\0alice-secret", &users)),
            "alice"
        );
        assert_eq!(
            message(authenticate(b"alice\0alice\0alice-secret", &users)),
            "alice"
        );
        assert_eq!(
            message(authenticate(b"\0alice\0wrong", &users)),
            "Authentication failed: Invalid username or password"
        );
        assert_eq!(
            message(authenticate(b"\0mallory\0alice-secret", &users)),
            "Authentication failed: Invalid username or password"
        );
        assert_eq!(
            message(authenticate(b"\0\0alice-secret", &users)),
            "Authentication failed: username not specified"
        );
        assert_eq!(
            message(authenticate(b"\0alice\0", &users)),
            "Authentication failed: password not specified"
        );
        assert_eq!(
            message(authenticate(b"bob\0alice\0alice-secret", &users)),
            "Authentication failed: Client requested an authorization id that is different from username"
        );
        // Malformed tokens get the generic message, as Kafka hides SaslException details.
        assert_eq!(
            message(authenticate(b"alice-secret", &users)),
            "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"
        );
    }
}
