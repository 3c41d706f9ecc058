//! Property tests: whatever is appended reads back byte for byte, also after a reopen.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use gregor_log::batch::{BatchBuilder, Header, RecordBatch};
use gregor_log::compression::Compression;
use gregor_log::config::LogConfig;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct GenRecord {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ts_offset: i64,
}

fn gen_record() -> impl Strategy<Value = GenRecord> {
    (
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
        proptest::collection::vec(
            (
                proptest::collection::vec(any::<u8>(), 0..8),
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
            ),
            0..3,
        ),
        -1000i64..1000,
    )
        .prop_map(|(key, value, headers, ts_offset)| GenRecord {
            key,
            value,
            headers,
            ts_offset,
        })
}

fn gen_codec() -> impl Strategy<Value = Compression> {
    prop_oneof![
        Just(Compression::None),
        Just(Compression::Gzip),
        Just(Compression::Snappy),
        Just(Compression::Lz4),
        Just(Compression::Zstd)
    ]
}

fn build(records: &[GenRecord], codec: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(codec);
    for r in records {
        let headers: Vec<Header<'_>> = r
            .headers
            .iter()
            .map(|(k, v)| Header {
                key: k,
                value: v.as_deref(),
            })
            .collect();
        builder.append(
            NOW + r.ts_offset,
            r.key.as_deref(),
            r.value.as_deref(),
            &headers,
        );
    }
    builder.build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn append_then_read_round_trips(
        batches in proptest::collection::vec((proptest::collection::vec(gen_record(), 1..6), gen_codec()), 1..25),
        segment_bytes in 600u64..5000,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig { segment_bytes, index_interval_bytes: 100, ..LogConfig::default() };
        let mut expected = Vec::new();
        {
            let (_d, mut log) = open(dir.path(), config.clone());
            for (records, codec) in &batches {
                let bytes = build(records, *codec);
                if bytes.len() as u64 > segment_bytes {
                    continue;
                }
                let info = log.append(&bytes, NOW, 0).unwrap();
                prop_assert_eq!(info.first_offset, expected.len() as i64);
                for mut r in RecordBatch::new(&bytes).unwrap().owned_records().unwrap() {
                    r.offset += info.first_offset;
                    expected.push(r);
                }
            }
            prop_assert_eq!(read_all(&mut log, 0), expected.clone());
            // Reading from any offset starts at the batch holding it.
            for from in [0, expected.len() as i64 / 2, (expected.len() as i64 - 1).max(0)] {
                let got = read_all(&mut log, from);
                prop_assert_eq!(&got[..], &expected[from as usize..]);
            }
        }
        // An unclean reopen recovers every whole batch.
        let (_d, mut log) = open(dir.path(), config);
        prop_assert_eq!(log.log_end_offset(), expected.len() as i64);
        prop_assert_eq!(read_all(&mut log, 0), expected);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Hostile input: validation answers every mutation of a batch (CRC fixed up so the body is
    /// examined) with Ok or a Kafka error, never a panic.
    #[test]
    fn validation_never_panics_on_mutated_batches(
        records in proptest::collection::vec(gen_record(), 1..4),
        codec in gen_codec(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        refix in any::<bool>(),
    ) {
        let mut bytes = build(&records, codec);
        for (at, value) in flips {
            let i = at.index(bytes.len());
            if i >= 12 {
                bytes[i] = value;
            }
        }
        if refix {
            let crc = crc32c::crc32c(&bytes[21..]);
            bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        let _ = gregor_log::validate::validate(&bytes, &LogConfig::default(), NOW, "t-0");
        let _ = gregor_log::validate::validate(&bytes[..cut.index(bytes.len())], &LogConfig::default(), NOW, "t-0");
        if let Ok(batch) = RecordBatch::new(&bytes) {
            let _ = batch.owned_records();
        }
    }
}
