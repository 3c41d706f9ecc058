//! Whatever bytes a client sends, decoding a request body ends in a value or an error: never a
//! panic and never an allocation sized by a length read from the wire (which would abort the
//! whole node). Seeded, so a failure reproduces.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::{BufMut, Bytes, BytesMut};
use gregor_actors::handlers::APIS;
use kafka_protocol::messages::RequestKind;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const CASES_PER_VERSION: usize = 400;

fn decode(api: &gregor_actors::handlers::ApiSpec, version: i16, bytes: Vec<u8>) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let mut body = Bytes::from(bytes);
        let _ = RequestKind::decode(api.key, &mut body, version);
    }));
    assert!(outcome.is_ok(), "decoding {} v{version} panicked", api.name);
}

#[test]
fn random_bodies_never_panic() {
    let mut rng = StdRng::seed_from_u64(0x6772_6567_6f72);
    for api in APIS {
        for version in api.versions.min..=api.versions.max {
            for _ in 0..CASES_PER_VERSION {
                let length = rng.random_range(0..256);
                let bytes: Vec<u8> = (0..length).map(|_| rng.random()).collect();
                decode(api, version, bytes);
            }
        }
    }
}

#[test]
fn huge_array_and_string_lengths_are_errors() {
    // Classic arrays (int32 count), compact arrays (uvarint count + 1) and strings claiming far
    // more elements than the frame holds, at every offset of a small body.
    let mut claims = Vec::new();
    let mut classic = BytesMut::new();
    classic.put_i32(i32::MAX);
    claims.push(classic.to_vec());
    claims.push(vec![0xff, 0xff, 0xff, 0xff, 0x0f]); // uvarint u32::MAX
    claims.push(vec![0xfe, 0xff, 0xff, 0xff, 0x07]); // uvarint 2^31 - 2
    let mut string = BytesMut::new();
    string.put_i16(i16::MAX);
    claims.push(string.to_vec());
    for api in APIS {
        for version in api.versions.min..=api.versions.max {
            for claim in &claims {
                for prefix in 0..12 {
                    let mut bytes = vec![0u8; prefix];
                    bytes.extend_from_slice(claim);
                    bytes.extend_from_slice(&[0u8; 8]);
                    decode(api, version, bytes);
                }
            }
        }
    }
}
