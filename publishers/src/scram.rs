//! SCRAM-SHA-256 / SCRAM-SHA-512 credentials and their maths (RFC 5802, RFC 7677), as Kafka's
//! `ScramFormatter` computes them. The server stores only the salt, the iteration count, the
//! stored key and the server key; the password itself never reaches the metadata log.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

/// A SCRAM mechanism, with Kafka's type byte in `UserScramCredentialRecord.Mechanism`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    /// `SCRAM-SHA-256`, type 1.
    Sha256,
    /// `SCRAM-SHA-512`, type 2.
    Sha512,
}

/// Kafka's `ScramMechanism` bounds on the iteration count.
pub const MIN_ITERATIONS: i32 = 4096;
/// Kafka's upper bound on the iteration count.
pub const MAX_ITERATIONS: i32 = 16384;

impl ScramMechanism {
    /// Every mechanism, in type order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism of a SASL name (exact, as Kafka matches it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Kafka's type byte.
    pub fn type_code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The mechanism of a type byte.
    pub fn from_type(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.type_code() == code)
    }

    /// `Hi(password, salt, i)`: PBKDF2 with this mechanism's HMAC. Kafka applies no SASLprep.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut out = vec![0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            ScramMechanism::Sha512 => {
                let mut out = vec![0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }

    /// `HMAC(key, message)`.
    pub fn hmac(self, key: &[u8], message: &[u8]) -> Vec<u8> {
        // HMAC accepts keys of any length, so new_from_slice cannot fail here.
        match self {
            ScramMechanism::Sha256 => Hmac::<Sha256>::new_from_slice(key)
                .map(|mac| mac.chain_update(message).finalize().into_bytes().to_vec())
                .unwrap_or_default(),
            ScramMechanism::Sha512 => Hmac::<Sha512>::new_from_slice(key)
                .map(|mac| mac.chain_update(message).finalize().into_bytes().to_vec())
                .unwrap_or_default(),
        }
    }

    /// `H(message)`.
    pub fn hash(self, message: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(message).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(message).to_vec(),
        }
    }

    /// `ClientKey = HMAC(SaltedPassword, "Client Key")`.
    pub fn client_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac(salted_password, b"Client Key")
    }

    /// `ServerKey = HMAC(SaltedPassword, "Server Key")`.
    pub fn server_key(self, salted_password: &[u8]) -> Vec<u8> {
        self.hmac(salted_password, b"Server Key")
    }

    /// `StoredKey = H(ClientKey)`.
    pub fn stored_key(self, client_key: &[u8]) -> Vec<u8> {
        self.hash(client_key)
    }

    /// The credential a client-side salted password gives (AlterUserScramCredentials sends the
    /// salted password, never the password).
    pub fn credential_from_salted(
        self,
        salt: Vec<u8>,
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        ScramCredential {
            salt,
            stored_key: self.stored_key(&self.client_key(salted_password)),
            server_key: self.server_key(salted_password),
            iterations,
        }
    }

    /// The credential of `password` with `salt`.
    pub fn credential(self, password: &[u8], salt: Vec<u8>, iterations: i32) -> ScramCredential {
        let salted = self.salted_password(password, &salt, iterations.max(1) as u32);
        self.credential_from_salted(salt, &salted, iterations)
    }
}

impl std::fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the server keeps of one user's password for one mechanism.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ScramCredential {
    /// The salt.
    pub salt: Vec<u8>,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: i32,
}

// Keys are secrets: debug output names the iteration count only.
impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// XOR of two equal-length byte strings (the client proof and its signature).
pub fn xor(left: &[u8], right: &[u8]) -> Vec<u8> {
    left.iter().zip(right).map(|(a, b)| a ^ b).collect()
}

/// Constant-time equality, so a proof check leaks nothing through its timing.
pub fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    left.len() == right.len() && bool::from(left.ct_eq(right))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .filter_map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
            .collect()
    }

    #[test]
    fn mechanisms_round_trip_names_and_types() {
        for mechanism in ScramMechanism::ALL {
            assert_eq!(ScramMechanism::from_name(mechanism.name()), Some(mechanism));
            assert_eq!(
                ScramMechanism::from_type(mechanism.type_code()),
                Some(mechanism)
            );
        }
        assert_eq!(ScramMechanism::from_name("scram-sha-256"), None);
        assert_eq!(ScramMechanism::from_type(0), None);
    }

    /// RFC 7677 section 3: user `user`, password `pencil`, salt `W22ZaJ0SNY7soEsUEjb6gQ==`,
    /// 4096 iterations; the client proof and server signature of its exchange.
    #[test]
    fn rfc7677_vector() {
        let mechanism = ScramMechanism::Sha256;
        let salt = unhex("5b6d99689d12358eeca04b141236fa81");
        let salted = mechanism.salted_password(b"pencil", &salt, 4096);
        let auth_message = "n=user,r=rOprNGfwEbeRWgbNEkqO,\
            r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,\
            c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let credential = mechanism.credential_from_salted(salt.clone(), &salted, 4096);
        let client_key = mechanism.client_key(&salted);
        let signature = mechanism.hmac(&credential.stored_key, auth_message.as_bytes());
        let proof = xor(&client_key, &signature);
        assert_eq!(
            proof,
            unhex("747cdb65aa56224e2352137e52d7bdcad6a0f738df30782caa69a2cfb0277554")
        );
        let server_signature = mechanism.hmac(&credential.server_key, auth_message.as_bytes());
        assert_eq!(
            server_signature,
            unhex("eabae24d1062db75a9451ff0b6ea7e98c8546549ff741e672d3251b2397de46e")
        );
        assert_eq!(mechanism.credential(b"pencil", salt, 4096), credential);
    }

    #[test]
    fn credentials_never_print_their_keys() {
        let credential = ScramMechanism::Sha512.credential(b"secret", vec![1, 2, 3], 4096);
        let printed = format!("{credential:?}");
        assert_eq!(printed, "ScramCredential { iterations: 4096, .. }");
    }
}
