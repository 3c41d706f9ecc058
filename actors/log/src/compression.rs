//! The four codecs of record batches, framed as Kafka's Java client frames them.
//!
//! * gzip: RFC 1952 (Java's `GZIPOutputStream`); concatenated members are accepted on read.
//! * snappy: snappy-java's xerial framing: the 16-byte header `\x82SNAPPY\0`, version 1, compatible 1, then
//!   blocks of `[u32 big-endian length][raw snappy block]` of at most 32 KiB input each. A stream without the
//!   header is read as one raw snappy block, as snappy-java does.
//! * lz4: the standard LZ4 frame format with independent 64 KiB blocks and no checksums, as Kafka's
//!   `Lz4BlockOutputStream` writes it. Kafka decodes each block on its own, so a frame of linked blocks is
//!   refused on read, as Kafka refuses it. lz4_flex has no high-compression mode, so `compression.lz4.level`
//!   is not applied.
//! * zstd: standard zstd frames (zstd-jni streams).

use std::io::{Read, Write};

/// Largest decompressed size accepted from one batch: guards the broker against decompression bombs.
pub const MAX_DECOMPRESSED_BYTES: usize = 256 * 1024 * 1024;

const SNAPPY_XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
const SNAPPY_XERIAL_MAGIC_LEN: usize = 8;
const SNAPPY_BLOCK_SIZE: usize = 32 * 1024;
const LZ4_FRAME_MAGIC: u32 = 0x184D_2204;

/// A batch codec (attributes bits 0–2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// Every codec, by id.
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codec of an attributes value; `None` for the unassigned ids 5–7.
    pub fn from_id(id: u8) -> Option<Self> {
        match id {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }

    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// Kafka's name (`CompressionType.name`), as kafka-dump-log prints it.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// Codec levels from the topic config (KIP-390); `None` means the codec's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompressionLevels {
    pub gzip: i32,
    pub lz4: i32,
    pub zstd: i32,
}

impl Default for CompressionLevels {
    fn default() -> Self {
        CompressionLevels {
            gzip: -1,
            lz4: 9,
            zstd: 3,
        }
    }
}

/// Compresses `data` with `codec`.
pub fn compress(
    codec: Compression,
    data: &[u8],
    levels: CompressionLevels,
) -> std::io::Result<Vec<u8>> {
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => {
            let level = if (0..=9).contains(&levels.gzip) {
                flate2::Compression::new(levels.gzip as u32)
            } else {
                flate2::Compression::default()
            };
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::with_capacity(data.len() / 2 + 64), level);
            encoder.write_all(data)?;
            encoder.finish()
        }
        Compression::Snappy => {
            let mut out = Vec::with_capacity(data.len() / 2 + 64);
            out.extend_from_slice(SNAPPY_XERIAL_HEADER);
            let mut encoder = snap::raw::Encoder::new();
            for block in data.chunks(SNAPPY_BLOCK_SIZE) {
                let compressed = encoder.compress_vec(block).map_err(std::io::Error::other)?;
                let len = u32::try_from(compressed.len()).map_err(std::io::Error::other)?;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&compressed);
            }
            Ok(out)
        }
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(
                info,
                Vec::with_capacity(data.len() / 2 + 64),
            );
            encoder.write_all(data)?;
            encoder.finish().map_err(std::io::Error::other)
        }
        Compression::Zstd => zstd::stream::encode_all(data, levels.zstd),
    }
}

/// Why a batch's decompression stopped at [`MAX_DECOMPRESSED_BYTES`]: told apart from a corrupt
/// stream, which Kafka answers differently.
#[derive(Debug, thiserror::Error)]
#[error("decompressed batch exceeds the broker's limit")]
struct PastLimit;

/// The error a decompression past [`MAX_DECOMPRESSED_BYTES`] fails with.
pub(crate) fn past_limit() -> std::io::Error {
    std::io::Error::other(PastLimit)
}

/// Whether `error` is [`past_limit`]'s.
pub fn is_past_limit(error: &std::io::Error) -> bool {
    error
        .get_ref()
        .is_some_and(|inner| inner.downcast_ref::<PastLimit>().is_some())
}

/// Decompresses a batch's records section; fails on corrupt input or past [`MAX_DECOMPRESSED_BYTES`].
pub fn decompress(codec: Compression, data: &[u8]) -> std::io::Result<Vec<u8>> {
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => read_bounded(flate2::read::MultiGzDecoder::new(data)),
        Compression::Snappy => decompress_snappy(data),
        Compression::Lz4 => read_bounded(lz4_decoder(data)?),
        Compression::Zstd => read_bounded(zstd::stream::read::Decoder::with_buffer(data)?),
    }
}

/// A batch's records section as a stream of its decompressed bytes, for reading without
/// holding them all. Snappy (Kafka's xerial blocks) is decompressed whole: its format bounds
/// the output to a small multiple of the input.
pub fn reader<'a>(codec: Compression, data: &'a [u8]) -> std::io::Result<Box<dyn Read + 'a>> {
    Ok(match codec {
        Compression::None => Box::new(data),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
        Compression::Snappy => Box::new(std::io::Cursor::new(decompress_snappy(data)?)),
        Compression::Lz4 => Box::new(lz4_decoder(data)?),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(data)?),
    })
}

/// An lz4 frame's decoder, once its descriptor passed Kafka's checks (`Lz4BlockInputStream.readHeader`
/// with `FLG.validate` and `BD.validate`). lz4_flex also reads legacy and skippable frames, a
/// dictionary id and linked blocks, all of which Kafka refuses: it decodes each block on its own.
fn lz4_decoder(data: &[u8]) -> std::io::Result<lz4_flex::frame::FrameDecoder<&[u8]>> {
    let [m0, m1, m2, m3, flg, bd, ..] = *data else {
        return Err(std::io::Error::other("lz4 stream ended too early"));
    };
    if u32::from_le_bytes([m0, m1, m2, m3]) != LZ4_FRAME_MAGIC {
        return Err(std::io::Error::other("lz4 stream unsupported"));
    }
    let refusal = if flg & 0b11 != 0 {
        Some("lz4 frame descriptor's reserved bits must be 0")
    } else if flg & 0b10_0000 == 0 {
        Some("dependent lz4 block stream is unsupported")
    } else if flg >> 6 != 1 {
        Some("lz4 frame version is unsupported")
    } else if bd & 0b1000_1111 != 0 {
        Some("lz4 block descriptor's reserved bits must be 0")
    } else if (bd >> 4) & 0b111 < 4 {
        Some("lz4 block size value must be between 4 and 7")
    } else {
        None
    };
    match refusal {
        Some(reason) => Err(std::io::Error::other(reason)),
        None => Ok(lz4_flex::frame::FrameDecoder::new(data)),
    }
}

fn read_bounded(reader: impl Read) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    reader
        .take(MAX_DECOMPRESSED_BYTES as u64 + 1)
        .read_to_end(&mut out)?;
    if out.len() > MAX_DECOMPRESSED_BYTES {
        return Err(past_limit());
    }
    Ok(out)
}

fn decompress_snappy(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut decoder = snap::raw::Decoder::new();
    if data.len() < SNAPPY_XERIAL_HEADER.len()
        || data[..SNAPPY_XERIAL_MAGIC_LEN] != SNAPPY_XERIAL_HEADER[..SNAPPY_XERIAL_MAGIC_LEN]
    {
        check_snappy_len(data)?;
        return decoder.decompress_vec(data).map_err(std::io::Error::other);
    }
    let mut out = Vec::new();
    let mut rest = &data[SNAPPY_XERIAL_HEADER.len()..];
    while !rest.is_empty() {
        let (len, body) = rest
            .split_at_checked(4)
            .ok_or_else(|| std::io::Error::other("truncated snappy block length"))?;
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let (block, tail) = body
            .split_at_checked(len)
            .ok_or_else(|| std::io::Error::other("truncated snappy block"))?;
        check_snappy_len(block)?;
        if out.len() + snap::raw::decompress_len(block).map_err(std::io::Error::other)?
            > MAX_DECOMPRESSED_BYTES
        {
            return Err(past_limit());
        }
        out.extend_from_slice(
            &decoder
                .decompress_vec(block)
                .map_err(std::io::Error::other)?,
        );
        rest = tail;
    }
    Ok(out)
}

/// Refuses a raw snappy block before the decoder allocates the length its header claims: as
/// corrupt when its bytes cannot expand that far, past the limit when they could but the claim
/// exceeds [`MAX_DECOMPRESSED_BYTES`].
fn check_snappy_len(block: &[u8]) -> std::io::Result<()> {
    let claimed = snap::raw::decompress_len(block).map_err(std::io::Error::other)?;
    if claimed > snappy_max_expansion(block.len()) {
        return Err(std::io::Error::other(format!(
            "snappy block of {} bytes claims {claimed} bytes uncompressed",
            block.len()
        )));
    }
    if claimed > MAX_DECOMPRESSED_BYTES {
        return Err(past_limit());
    }
    Ok(())
}

/// The most a raw snappy block of `len` bytes can decompress to. Its elements are literals
/// (a tag, 0-4 length bytes, then the bytes themselves: never more out than in) and copies: 2
/// bytes for at most 11 out (1-byte offset), 3 bytes for at most 64 (2-byte offset), 5 bytes
/// for at most 64 (4-byte offset). The densest is 64 bytes from 3, so no block yields more
/// than 64/3 of its length; counting the length varint as element bytes only loosens it.
fn snappy_max_expansion(len: usize) -> usize {
    len.saturating_mul(64) / 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for codec in Compression::ALL {
            let packed = compress(codec, &data, CompressionLevels::default()).unwrap();
            assert_eq!(decompress(codec, &packed).unwrap(), data, "{codec:?}");
        }
    }

    #[test]
    fn snappy_uses_xerial_framing_and_reads_raw_blocks() {
        let packed = compress(
            Compression::Snappy,
            b"hello hello hello",
            CompressionLevels::default(),
        )
        .unwrap();
        assert_eq!(&packed[..16], SNAPPY_XERIAL_HEADER);
        let block_len =
            u32::from_be_bytes([packed[16], packed[17], packed[18], packed[19]]) as usize;
        assert_eq!(packed.len(), 20 + block_len);
        let raw = snap::raw::Encoder::new()
            .compress_vec(b"raw block")
            .unwrap();
        assert_eq!(decompress(Compression::Snappy, &raw).unwrap(), b"raw block");
    }

    #[test]
    fn lz4_frame_header_is_kafkas() {
        let packed = compress(Compression::Lz4, b"abc", CompressionLevels::default()).unwrap();
        assert_eq!(&packed[..4], &[0x04, 0x22, 0x4d, 0x18], "LZ4 frame magic");
        assert_eq!(packed[4] & 0x20, 0x20, "independent blocks");
        assert_eq!(packed[4] & 0x14, 0, "no block or content checksum");
        assert_eq!(packed[5], 0x40, "64 KiB blocks");
    }

    #[test]
    fn lz4_frames_kafka_refuses_are_refused() {
        let data: Vec<u8> = b"value-1-".repeat(25_000);
        let framed = |info: lz4_flex::frame::FrameInfo| {
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            encoder.write_all(&data).unwrap();
            encoder.finish().unwrap()
        };
        let linked = framed(
            lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Linked),
        );
        // The legacy frame: its magic, then blocks of [u32 little-endian length][lz4 block].
        let block = lz4_flex::block::compress(&data);
        let mut legacy = 0x184C_2102u32.to_le_bytes().to_vec();
        legacy.extend_from_slice(&(block.len() as u32).to_le_bytes());
        legacy.extend_from_slice(&block);
        // lz4_flex reads both: only the descriptor check refuses them.
        for frame in [&linked, &legacy] {
            let mut out = Vec::new();
            lz4_flex::frame::FrameDecoder::new(&frame[..])
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, data);
        }
        assert_eq!(linked[4], 0x40, "FLG: version 1, dependent blocks");
        let packed = compress(Compression::Lz4, &data, CompressionLevels::default()).unwrap();
        let with = |at: usize, byte: u8| {
            let mut frame = packed.clone();
            frame[at] = byte;
            frame
        };
        let cases = [
            (linked.clone(), "dependent lz4 block stream is unsupported"),
            (legacy, "lz4 stream unsupported"),
            (
                with(4, 0x61),
                "lz4 frame descriptor's reserved bits must be 0",
            ),
            (with(4, 0xa0), "lz4 frame version is unsupported"),
            (
                with(5, 0x41),
                "lz4 block descriptor's reserved bits must be 0",
            ),
            (
                with(5, 0x30),
                "lz4 block size value must be between 4 and 7",
            ),
            (packed[..5].to_vec(), "lz4 stream ended too early"),
        ];
        for (frame, reason) in cases {
            let refused = decompress(Compression::Lz4, &frame).err();
            assert_eq!(refused.map(|e| e.to_string()).as_deref(), Some(reason));
            let refused = reader(Compression::Lz4, &frame).err();
            assert_eq!(refused.map(|e| e.to_string()).as_deref(), Some(reason));
        }
    }

    #[test]
    fn a_snappy_block_claiming_more_than_it_can_hold_is_corrupt() {
        // The densest block: a 1-byte literal, then copies of 64 bytes at offset 1 (3 bytes each).
        let copies = 1000;
        let mut body = vec![0x00, b'a'];
        for _ in 0..copies {
            body.extend_from_slice(&[0xfe, 0x01, 0x00]);
        }
        let out = 1 + 64 * copies;
        let raw = |claimed: usize| {
            let mut block = Vec::new();
            let mut rest = claimed;
            while rest >= 0x80 {
                block.push((rest as u8) | 0x80);
                rest >>= 7;
            }
            block.push(rest as u8);
            block.extend_from_slice(&body);
            block
        };
        let densest = raw(out);
        assert_eq!(densest.len(), 3 + 2 + 3 * copies);
        assert!(snappy_max_expansion(densest.len()) >= out);
        assert_eq!(snappy_max_expansion(densest.len()), 64_106);
        assert_eq!(
            decompress(Compression::Snappy, &densest).unwrap(),
            vec![b'a'; out]
        );

        // 256 MiB - 1 claimed by 64 bytes: refused before the decoder allocates it.
        let liar = raw(MAX_DECOMPRESSED_BYTES - 1);
        let refused = decompress(Compression::Snappy, &liar[..64]).unwrap_err();
        assert!(!is_past_limit(&refused));
        assert_eq!(
            refused.to_string(),
            "snappy block of 64 bytes claims 268435455 bytes uncompressed"
        );
        // One byte over the bound of this block is corrupt too; at the bound it is read.
        let over = raw(snappy_max_expansion(densest.len()) + 1);
        assert!(!is_past_limit(
            &decompress(Compression::Snappy, &over).unwrap_err()
        ));

        // The same lie in a xerial chunk.
        let mut xerial = SNAPPY_XERIAL_HEADER.to_vec();
        xerial.extend_from_slice(&64u32.to_be_bytes());
        xerial.extend_from_slice(&liar[..64]);
        let refused = decompress(Compression::Snappy, &xerial).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "snappy block of 64 bytes claims 268435455 bytes uncompressed"
        );
        assert!(reader(Compression::Snappy, &xerial).is_err());
    }

    #[test]
    fn corrupt_streams_fail_without_panicking() {
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            assert!(
                decompress(
                    codec,
                    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xff"
                )
                .is_err(),
                "{codec:?}"
            );
            assert!(decompress(codec, &[0xff; 7]).is_err(), "{codec:?}");
        }
    }
}
